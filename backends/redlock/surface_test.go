//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// TestNoNameCollides: the library's own keys (fencing counters, hand-off
// lists, the node marker, wait queues) live where no lock name can reach
// them, so locks with any names can be held at once, and each keeps its
// tokens increasing.
func TestNoNameCollides(t *testing.T) {
	shared(t)
	rl := newRedlock(t, addrs, redlock.WithFencing(true), redlock.WithClockFloor(false))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{"x", "x:token", "x:handoff", "redlock:node", "redlock", ""}
	tokens := map[string]uint64{}
	for round := range 3 {
		var leases []locker.Lease
		for _, name := range names[:len(names)-1] {
			// Acquire, not TryAcquire: a node that misses its per-node
			// timeout on a loaded machine costs a retry, not the test.
			lease, err := rl.Acquire(ctx, name, locker.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("round %d: lock %q while the others are held: %v", round, name, err)
			}
			tok, _ := lease.Token()
			if tok <= tokens[name] {
				t.Errorf("round %d: lock %q: token %d after %d", round, name, tok, tokens[name])
			}
			tokens[name] = tok
			leases = append(leases, lease)
		}
		for i, lease := range leases {
			if err := lease.Release(ctx); err != nil {
				t.Errorf("round %d: release %q: %v", round, names[i], err)
			}
		}
	}
}

// TestReservedPrefixRefused: a lock name in the library's namespace is
// refused with an error naming it, not silently allowed to collide.
func TestReservedPrefixRefused(t *testing.T) {
	shared(t)
	rl := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, key := range []string{"\x00redlock:node", "\x00redlock:token:x", "\x00redlock:"} {
		for name, call := range map[string]func(context.Context, string, ...locker.Option) (locker.Lease, error){
			"Acquire": rl.Acquire, "TryAcquire": rl.TryAcquire,
		} {
			if _, err := call(ctx, key); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
				t.Errorf("%s(%q) = %v, want ErrInvalid naming the key", name, key, err)
			}
		}
	}
}

// TestTTLAboveMaxTTL (issue 19, §5): a TTL above the max TTL, which the
// restart quarantine covers, is refused, in Acquire and in Extend, with
// an error that names the option that raises it.
func TestTTLAboveMaxTTL(t *testing.T) {
	shared(t)
	rl := newRedlock(t, addrs, redlock.WithMaxTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rl.Acquire(ctx, "k", locker.WithTTL(2*time.Second)); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "WithMaxTTL") {
		t.Errorf("Acquire with a TTL above the max TTL = %v, want ErrInvalid naming WithMaxTTL", err)
	}
	lease, err := rl.Acquire(ctx, "k", locker.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if err := lease.Extend(ctx, 2*time.Second); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "WithMaxTTL") {
		t.Errorf("Extend beyond the max TTL = %v, want ErrInvalid naming WithMaxTTL", err)
	}
}

// TestOptionsInAnyOrder: the options that depend on each other give the
// same Redlock, or the same refusal, whatever their order.
func TestOptionsInAnyOrder(t *testing.T) {
	shared(t)
	for _, tc := range []struct {
		name    string
		opts    []redlock.Option
		fencing bool
		refused string
	}{
		{"clock floor alone implies fencing", []redlock.Option{redlock.WithClockFloor(true)}, true, ""},
		{"fencing alone", []redlock.Option{redlock.WithFencing(true)}, true, ""},
		{"no clock floor keeps fencing off", []redlock.Option{redlock.WithClockFloor(false)}, false, ""},
		{"floor off, fencing on", []redlock.Option{redlock.WithClockFloor(false), redlock.WithFencing(true)}, true, ""},
		{"floor on, fencing off", []redlock.Option{redlock.WithClockFloor(true), redlock.WithFencing(false)}, false, "WithClockFloor(true) with WithFencing(false)"},
	} {
		for _, reversed := range []bool{false, true} {
			opts := slices.Clone(tc.opts)
			if reversed {
				slices.Reverse(opts)
			}
			t.Run(fmt.Sprintf("%s/reversed=%v", tc.name, reversed), func(t *testing.T) {
				clients := newClients(addrs)
				defer closeClients(clients)
				rl, err := redlock.New(clients, opts...)
				if tc.refused != "" {
					if err == nil {
						rl.Close()
					}
					if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.refused) {
						t.Fatalf("New = %v, want ErrInvalid mentioning %q", err, tc.refused)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer rl.Close()
				if got := rl.Info().Fencing; got != tc.fencing {
					t.Fatalf("fencing = %v, want %v", got, tc.fencing)
				}
			})
		}
	}
}

// TestNewRefuses: New names what is wrong with the clients it is given.
func TestNewRefuses(t *testing.T) {
	failover := func() *redis.Client {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	}
	a, b := failover(), failover()
	defer a.Close()
	defer b.Close()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	for _, tc := range []struct {
		name    string
		clients []*redis.Client
		want    string
	}{
		{"none", nil, "at least one"},
		{"nil", []*redis.Client{plain, nil}, "client 1 is nil"},
		{"twice", []*redis.Client{plain, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}, "given twice"},
		{"two databases of one server", []*redis.Client{plain, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 1})}, "databases 0 and 1"},
		{"two failover clients", []*redis.Client{a, plain, b}, "both Sentinel failover clients"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl, err := redlock.New(tc.clients)
			if err == nil {
				rl.Close()
				t.Fatalf("New succeeded")
			}
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	// One failover client (with plain ones) is fine.
	rl, err := redlock.New([]*redis.Client{a, plain})
	if err != nil {
		t.Fatalf("one failover client: %v", err)
	}
	rl.Close()
}

// TestOneServerUnderTwoAddresses (issue 19, §5): two addresses of one
// server (here 127.0.0.1 and localhost) are one master, not two: their
// connections find the same run_id, neither votes, and Acquire fails at
// once naming both, rather than count one server twice toward a quorum.
func TestOneServerUnderTwoAddresses(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) {
			_, addrs := fresh(t, 2, redisOptions{})
			_, port, _ := strings.Cut(addrs[0], ":")
			rl := newRedlock(t, []string{addrs[0], "localhost:" + port, addrs[1]}, redlock.WithQuarantine(quarantine))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := rl.Acquire(ctx, "k")
			if !errors.Is(err, redlock.ErrConfig) || !strings.Contains(err.Error(), "one server") || !strings.Contains(err.Error(), "localhost:"+port) {
				t.Fatalf("Acquire on one server under two addresses = %v, want ErrConfig naming both", err)
			}
			t.Log(err)
		})
	}
}

// TestErrorsWrapSentinels: a failed Extend (a majority down) and
// operations cut by Close return errors that wrap a locker sentinel, with
// no "%!w" in their text.
func TestErrorsWrapSentinels(t *testing.T) {
	nodes, addrs := fresh(t, 3, redisOptions{})
	rl := newRedlock(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := rl.Acquire(ctx, "k", locker.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	err = lease.Extend(ctx, 5*time.Second)
	if !errors.Is(err, locker.ErrUnavailable) || strings.Contains(err.Error(), "%!") {
		t.Errorf("Extend with a majority down = %v, want ErrUnavailable and no formatting error", err)
	}
	rl.Close()
	for name, err := range map[string]error{
		"Acquire":    func() error { _, err := rl.Acquire(ctx, "x"); return err }(),
		"TryAcquire": func() error { _, err := rl.TryAcquire(ctx, "x"); return err }(),
		"Bootstrap":  rl.Bootstrap(ctx),
	} {
		if !errors.Is(err, locker.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if !errors.Is(lease.Err(), locker.ErrClosed) || !errors.Is(lease.Err(), locker.ErrLost) {
		t.Errorf("a lease ended by Close: Err = %v, want ErrLost wrapping ErrClosed", lease.Err())
	}
}

// TestMisconfigurationFailsAtOnce (issue 19, §3): a refusal of
// Redlock's configuration — a wrong password, an ACL that refuses INFO
// (the restart quarantine needs it), EVALSHA, or HSETNX (the lean path's
// grant: what TestLeanRefusedByACL would start a server for), or INCR
// with fencing tokens (inside the lean path's advance script, or in its
// grant without the clock floor) — cannot be
// cured by
// retrying: Acquire, even on a context that never ends, fails at once with
// an error wrapping ErrConfig that says what the user lacks.
func TestMisconfigurationFailsAtOnce(t *testing.T) {
	nodes, _ := fresh(t, 1, redisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, acl := range [][]string{
		{"ACL", "SETUSER", "locker", "on", ">secret", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "noinfo", "on", ">secret", "~*", "&*", "+@all", "-info"},
		{"ACL", "SETUSER", "noeval", "on", ">secret", "~*", "&*", "+@all", "-evalsha"},
		{"ACL", "SETUSER", "nohsetnx", "on", ">secret", "~*", "&*", "+@all", "-hsetnx"},
		{"ACL", "SETUSER", "noincr", "on", ">secret", "~*", "&*", "+@all", "-incr"},
	} {
		if err := direct(t, nodes[0]).Do(ctx, toAny(acl)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, user, pass string
		want             []string
		opts             []redlock.Option
	}{
		{"wrong password", "locker", "wrong", []string{"WRONGPASS"}, nil},
		{"ACL without INFO", "noinfo", "secret", []string{"ACL", "+info"}, nil},
		{"ACL without EVALSHA", "noeval", "secret", []string{"ACL", "+evalsha"}, nil},
		// The lean path's grant (issue 29; TestLeanRefusedByACL).
		{"ACL without HSETNX", "nohsetnx", "secret", []string{"ACL", "+hsetnx"}, nil},
		// The lean path's advance script, with fencing.
		{"ACL without INCR, fencing", "noincr", "secret", []string{"ACL", "+incr"}, []redlock.Option{redlock.WithFencing(true)}},
		{"ACL without INCR, fencing without the clock floor", "noincr", "secret", []string{"ACL", "+incr"},
			[]redlock.Option{redlock.WithFencing(true), redlock.WithClockFloor(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: nodes[0].Addr(), Username: tc.user, Password: tc.pass})
			defer client.Close()
			rl, err := redlock.New([]*redis.Client{client}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			start := time.Now()
			_, err = rl.Acquire(context.Background(), "k")
			took := time.Since(start)
			if !errors.Is(err, redlock.ErrConfig) || errors.Is(err, locker.ErrNotAcquired) {
				t.Fatalf("Acquire = %v, want an error wrapping ErrConfig (and not ErrNotAcquired, which is retried)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Acquire = %v, want it to name %q", err, w)
				}
			}
			if took > 5*time.Second {
				t.Errorf("Acquire took %v to fail", took)
			}
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
		})
	}
	// Without the quarantine, INFO is not needed.
	client := redis.NewClient(&redis.Options{Addr: nodes[0].Addr(), Username: "noinfo", Password: "secret"})
	defer client.Close()
	plain, err := redlock.New([]*redis.Client{client}, redlock.WithQuarantine(false))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	lease, err := plain.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("without the quarantine: %v", err)
	}
	lease.Release(ctx)
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
