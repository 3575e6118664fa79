//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// TestNewRefusesMultiMasterClients: New refuses every client that is not
// one master, naming its index and why; none of them is dialled.
func TestNewRefusesMultiMasterClients(t *testing.T) {
	one := func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) }
	for _, c := range []struct {
		name string
		bad  func() redis.UniversalClient
		want string
	}{
		{"cluster", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
		}, "client 1 is a *redis.ClusterClient"},
		{"universal, two addresses", func() redis.UniversalClient {
			return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
		}, "client 1 is a *redis.ClusterClient"},
		{"failover cluster", func() redis.UniversalClient {
			return redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
		}, "client 1 is a *redis.ClusterClient"},
		{"ring", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
		}, "client 1 is a *redis.Ring"},
		{"nil interface", func() redis.UniversalClient { return nil }, "client 1 is nil"},
		{"nil *redis.Client", func() redis.UniversalClient { return (*redis.Client)(nil) }, "client 1 is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := c.bad()
			clients := []redis.UniversalClient{one(), bad, one()}
			t.Cleanup(func() {
				clients[0].Close()
				clients[2].Close()
				if _, isNil := bad.(*redis.Client); bad != nil && !isNil {
					bad.Close()
				}
			})
			rl, err := redlock.New(clients)
			if err == nil {
				rl.Close()
				t.Fatal("New accepted it")
			}
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v; want an ErrInvalid naming %q", err, c.want)
			}
		})
	}
}

// TestNewUniversalClients: clients built as redis.UniversalClient (by
// NewUniversalClient with one address) work as *redis.Client do, and the
// adopter's hooks do not see Redlock's commands, as New's documentation
// says: Redlock dials connections of its own.
func TestNewUniversalClients(t *testing.T) {
	shared(t)
	var seen atomic.Int64
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{a}})
		clients[i].AddHook(countingHook{&seen})
		t.Cleanup(func() { clients[i].Close() })
	}
	rl, err := redlock.New(clients, redlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "universal:" + t.Name()
	lease, err := rl.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rl.TryAcquire(ctx, key); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("second TryAcquire while held: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the clients' hooks saw %d commands; New's documentation says they see none", n)
	}
	// The hooks work: the client's own commands go through them.
	if err := clients[0].Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if seen.Load() == 0 {
		t.Fatal("the hook saw no PING: it tested nothing")
	}
}

// countingHook counts the commands a client processes.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestKeyPrefix: WithKeyPrefix moves every key of Redlock's own (the
// node's state, fencing counters, queues) under the prefix, refuses lock
// names under it and the empty prefix, naming each bad value; a client
// with another prefix still excludes it on the lock key itself.
func TestKeyPrefix(t *testing.T) {
	shared(t)
	for _, c := range []struct {
		prefix, want string
	}{
		{"", `key prefix "": must not be empty`},
	} {
		clients := newClients(addrs)
		_, err := redlock.New(clients, redlock.WithKeyPrefix(c.prefix))
		closeClients(clients)
		if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("WithKeyPrefix(%q): %v; want an ErrInvalid with %q", c.prefix, err, c.want)
		}
	}

	nodes, naddrs := fresh(t, 3, redisOptions{})
	const prefix = "app:rl:"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rl := newRedlock(t, naddrs, redlock.WithKeyPrefix(prefix), redlock.WithFencing(true))
	// The nodes were bootstrapped under the default prefix only: under
	// this one they are new.
	if _, err := rl.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("before Bootstrap under the prefix: %v; want ErrNotAcquired", err)
	}
	if err := rl.Bootstrap(ctx, redlock.Force()); err != nil {
		t.Fatal(err)
	}
	if _, err := rl.Acquire(ctx, prefix+"x"); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), `"app:rl:x"`) {
		t.Fatalf("Acquire(%q): %v; want an ErrInvalid naming it", prefix+"x", err)
	}
	lease, err := rl.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	other := newRedlock(t, naddrs) // the default prefix
	if _, err := other.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("another prefix's TryAcquire of a held key: %v; want ErrNotAcquired", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		keys, err := direct(t, nd).Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, k := range keys {
			have[k] = true
		}
		for _, k := range []string{prefix + "node", prefix + "token:k"} {
			if !have[k] {
				t.Errorf("node %s: no key %q; keys %q", nd.Addr(), k, keys)
			}
		}
		marker, err := direct(t, nd).HGet(ctx, prefix+"node", prefix).Result()
		if err != nil || marker == "" {
			t.Errorf("node %s: marker under field %q: %q, %v", nd.Addr(), prefix, marker, err)
		}
	}
}

// wrapped is an adopter's own client type around a *redis.Client, as
// instrumentation libraries make them: one master, which New accepts.
type wrapped struct{ *redis.Client }

// TestNewAcceptsWrappedClient: a client type of the adopter's own that
// says which master it talks to (an Options() *redis.Options method) is
// one master, and works.
func TestNewAcceptsWrappedClient(t *testing.T) {
	shared(t)
	clients := make([]wrapped, len(addrs))
	for i, a := range addrs {
		clients[i] = wrapped{redis.NewClient(&redis.Options{Addr: a})}
		t.Cleanup(func() { clients[i].Close() })
	}
	rl, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := rl.Acquire(ctx, "wrapped:"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
