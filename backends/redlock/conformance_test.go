//go:build go1.25

package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// opener returns a locktest.Opener of Redlocks over addrs with opts, each
// with its own clients, which its Close closes.
func opener(addrs []string, opts ...redlock.Option) locktest.Opener {
	return func(t testing.TB) locker.Locker {
		clients := newClients(addrs)
		rl, err := redlock.New(clients, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return owning{rl, clients}
	}
}

// owning is a Redlock that closes its clients when it is closed.
type owning struct {
	*redlock.Redlock
	clients []*redis.Client
}

func (o owning) Close() error {
	err := o.Redlock.Close()
	closeClients(o.clients)
	return err
}

// steal deletes key on every node, behind its holder's back.
func steal(addrs []string) func(testing.TB, string) {
	return func(t testing.TB, key string) {
		clients := newClients(addrs)
		defer closeClients(clients)
		for _, c := range clients {
			if err := c.Del(context.Background(), key).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestConformance(t *testing.T) {
	shared(t)
	for name, opts := range map[string][]redlock.Option{
		"fencing+quarantine": {redlock.WithFencing(true)},
		"plain":              {redlock.WithQuarantine(false)},
		"counters":           {redlock.WithFencing(true), redlock.WithClockFloor(false), redlock.WithQuarantine(false)},
		"quorum first":       {redlock.WithQuorumFirst(true)},
	} {
		t.Run(name, func(t *testing.T) {
			locktest.Run(t, opener(addrs, opts...), locktest.WithSteal(steal(addrs)))
		})
	}
}
