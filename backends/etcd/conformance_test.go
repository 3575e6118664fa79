package etcd

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestConformance runs the suite against the shared one-member cluster and
// a three-member cluster. Steal deletes the holder's key, which its
// own-key watch must turn into ErrLost.
func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute) // 52 s on a 2-core machine loaded about 10×
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			endpoints := single(t)
			if n > 1 {
				endpoints = cluster(t, n, false).Endpoints()
			}
			thief := rawClient(t, endpoints)
			prefixer := open(t, endpoints, nil) // only for Prefix; never used to lock
			if err := prefixer.Close(); err != nil {
				t.Fatal(err)
			}
			locktest.Run(t, func(t testing.TB) locker.Locker {
				return open(t, endpoints, nil)
			}, locktest.WithSteal(func(t testing.TB, key string) {
				steal(t, thief, prefixer.Prefix(key))
			}))
		})
	}
}
