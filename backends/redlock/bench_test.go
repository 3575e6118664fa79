package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker/locktest"
)

// The comparison the package README reports: our Redlock and redsync, the
// reference Go Redlock, on the same five nodes in the same run. Read the
// results as ratios; run with
//
//	go test -run '^$' -bench . -benchtime 3s ./backends/redlock
//
// Every benchmark reports ops/s and acquire-latency percentiles (µs).

// contender builds the lock under test: one Op per client, and a cleanup.
type contender struct {
	name string
	// setup returns the clients' Ops on key (or keys, one per client,
	// when hot is false). Like a process normally does, every client
	// shares one lock instance and its connections.
	setup func(b *testing.B, clients int, keys func(int) string) ([]locktest.Op, func())
}

func redlockContender(name string, opts ...redlock.Option) contender {
	return contender{name: name, setup: func(b *testing.B, n int, keys func(int) string) ([]locktest.Op, func()) {
		clients := newClients(addrs)
		rl, err := redlock.New(clients, opts...)
		if err != nil {
			b.Fatal(err)
		}
		ops := make([]locktest.Op, n)
		for i := range ops {
			ops[i] = locktest.AcquireRelease(rl, keys(i))
		}
		return ops, func() {
			rl.Close()
			closeClients(clients)
		}
	}}
}

func redsyncContender(name string, opts ...redsync.Option) contender {
	return contender{name: name, setup: func(b *testing.B, n int, keys func(int) string) ([]locktest.Op, func()) {
		clients := newClients(addrs)
		pools := make([]rsredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = rsgoredis.NewPool(c)
		}
		rs := redsync.New(pools...)
		ops := make([]locktest.Op, n)
		for i := range ops {
			key := keys(i)
			ops[i] = func(ctx context.Context) error {
				m := rs.NewMutex(key, opts...)
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				_, err := m.UnlockContext(ctx)
				return err
			}
		}
		return ops, func() { closeClients(clients) }
	}}
}

var contenders = []contender{
	redlockContender("redlock"),
	redlockContender("redlock-fencing", redlock.WithFencing(true)),
	redsyncContender("redsync"),
	redsyncContender("redsync-1ms", redsync.WithRetryDelay(time.Millisecond)),
}

// BenchmarkUncontended: one client, Acquire+Release of its own key.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 1, false) })
	}
}

// BenchmarkHotKey: 16 clients on one key.
func BenchmarkHotKey(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 16, true) })
	}
}

// BenchmarkHotKeyProcesses: 16 clients on one key, each with a Redlock
// (or redsync) of its own, as 16 processes would have: no local queue,
// every hand-off goes through the servers.
func BenchmarkHotKeyProcesses(b *testing.B) {
	for _, c := range []contender{separate(contenders[0]), separate(contenders[2])} {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 16, true) })
	}
}

// separate gives every client its own instance of c.
func separate(c contender) contender {
	return contender{name: c.name, setup: func(b *testing.B, n int, keys func(int) string) ([]locktest.Op, func()) {
		ops := make([]locktest.Op, n)
		var cleanups []func()
		for i := range ops {
			one, cleanup := c.setup(b, 1, func(int) string { return keys(i) })
			ops[i], cleanups = one[0], append(cleanups, cleanup)
		}
		return ops, func() {
			for _, f := range cleanups {
				f()
			}
		}
	}}
}

// BenchmarkDistinctKeys: 16 clients, each on its own key.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) { bench(b, c, 16, false) })
	}
}

func bench(b *testing.B, c contender, n int, hot bool) {
	prefix := fmt.Sprintf("bench:%s:%d", b.Name(), time.Now().UnixNano())
	ops, cleanup := c.setup(b, n, func(i int) string {
		if hot {
			return prefix
		}
		return fmt.Sprintf("%s:%d", prefix, i)
	})
	defer cleanup()
	locktest.Bench(b, ops)
}
