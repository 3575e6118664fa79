//go:build go1.25

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// Take a lock on five independent Redis masters, use its fencing token,
// and give it back. (addrs are the masters' addresses; they were admitted
// by Bootstrap when they were created: see the Bootstrap example.)
func Example() {
	clients := make([]*redis.Client, len(addrs))
	for i, addr := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: addr})
		defer clients[i].Close()
	}
	rl, err := redlock.New(clients, redlock.WithFencing(true))
	if err != nil {
		panic(err)
	}
	defer rl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := rl.Acquire(ctx, "example:invoice:42", locker.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	token, _ := lease.Token()
	fmt.Println("held on a quorum of", rl.Quorum(), "nodes; token > 0:", token > 0)
	fmt.Println("valid for at least 9s:", time.Until(lease.ValidUntil()) > 9*time.Second)

	// Someone else gets ErrNotAcquired while we hold it.
	if _, err := rl.TryAcquire(ctx, "example:invoice:42"); errors.Is(err, locker.ErrNotAcquired) {
		fmt.Println("second TryAcquire: not acquired")
	}
	if err := lease.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	<-lease.Done()
	fmt.Println("lease ended:", lease.Err())
	// Output:
	// held on a quorum of 3 nodes; token > 0: true
	// valid for at least 9s: true
	// second TryAcquire: not acquired
	// lease ended: lock released
}

// Keep a lease alive while the work runs, and stop working when it is
// lost: the watchdog extends it every TTL/3 and closes Done if it cannot.
func Example_autoExtend() {
	clients := make([]*redis.Client, len(addrs))
	for i, addr := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: addr})
		defer clients[i].Close()
	}
	rl, err := redlock.New(clients)
	if err != nil {
		panic(err)
	}
	defer rl.Close()

	ctx := context.Background()
	lease, err := rl.Acquire(ctx, "example:report", locker.WithTTL(300*time.Millisecond), locker.WithAutoExtend(true))
	if err != nil {
		panic(err)
	}
	select {
	case <-lease.Done(): // lost: stop, someone else may hold the key now
		fmt.Println("lost:", lease.Err())
	case <-time.After(time.Second): // the work, three TTLs long
		fmt.Println("still held after three TTLs")
	}
	_ = lease.Release(ctx)
	// Output:
	// still held after three TTLs
}

// The first contact with a new cluster: nodes just created do not vote
// until Bootstrap admits them, once. Without Force it refuses nodes that
// started less than the max TTL ago (they could be nodes that restarted
// empty while a lock was held); whoever created them forces it. Run again,
// it admits nothing. (justStarted starts three Redis servers for the
// example.)
func ExampleRedlock_Bootstrap() {
	newAddrs := justStarted(3)
	clients := make([]*redis.Client, len(newAddrs))
	for i, addr := range newAddrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: addr})
		defer clients[i].Close()
	}
	rl, err := redlock.New(clients)
	if err != nil {
		panic(err)
	}
	defer rl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err = rl.TryAcquire(ctx, "example:first")
	fmt.Println("before Bootstrap, not acquired:", errors.Is(err, locker.ErrNotAcquired))
	err = rl.Bootstrap(ctx)
	fmt.Println("without Force, refused as maybe in use:", errors.Is(err, redlock.ErrMaybeInUse))
	err = rl.Bootstrap(ctx, redlock.Force())
	fmt.Println("forced:", err)
	lease, err := rl.TryAcquire(ctx, "example:first")
	fmt.Println("acquired:", err == nil)
	lease.Release(ctx)
	err = rl.Bootstrap(ctx, redlock.Force())
	fmt.Println("again, refused as in use:", errors.Is(err, redlock.ErrInUse))
	// Output:
	// before Bootstrap, not acquired: true
	// without Force, refused as maybe in use: true
	// forced: <nil>
	// acquired: true
	// again, refused as in use: true
}
