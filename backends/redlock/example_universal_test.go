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

// New takes the clients an application already holds, as
// redis.UniversalClient values, one per independent master; a client that
// spreads keys over several servers is refused, with its index and why.
func ExampleNew_universalClient() {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, addr := range addrs {
		// With one address and no MasterName, a *redis.Client.
		clients[i] = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}})
		defer clients[i].Close()
	}
	rl, err := redlock.New(clients)
	if err != nil {
		panic(err)
	}
	defer rl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := rl.Acquire(ctx, "example:universal")
	if err != nil {
		panic(err)
	}
	fmt.Println("released:", lease.Release(ctx))

	// Two addresses make a cluster client: one client, several masters.
	cluster := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs[:2]})
	defer cluster.Close()
	_, err = redlock.New([]redis.UniversalClient{clients[0], cluster, clients[2]})
	fmt.Println("refused:", errors.Is(err, locker.ErrInvalid))
	// Output:
	// released: <nil>
	// refused: true
}
