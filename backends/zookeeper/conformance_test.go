package zookeeper

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestConformance runs the suite against the shared standalone server and
// a three-member ensemble. Steal deletes the holder's znode, which its
// own-node watch must turn into ErrLost.
func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute) // 54 s on a 2-core machine loaded about 10×
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			addrs := standalone(t)
			if n > 1 {
				addrs = ensemble(t, n, false).Addrs()
			}
			thief := rawConn(t, addrs)
			locktest.Run(t, func(t testing.TB) locker.Locker {
				return open(t, addrs, nil)
			}, locktest.WithSteal(func(t testing.TB, key string) {
				steal(t, thief, DefaultRoot, key)
			}))
		})
	}
}
