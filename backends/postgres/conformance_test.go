package postgres

import (
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

// TestConformance runs the suite in both modes on the shared server.
// Stealing an advisory lock terminates the session that holds it; stealing
// a lease row gives it to another holder.
func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 34 s on a 2-core machine loaded about 10×
	addr := shared.Get(t)
	steal := map[Mode]func(testing.TB, string){
		Advisory: func(t testing.TB, key string) { terminate(t, admin(t, addr), key) },
		Lease:    func(t testing.TB, key string) { giveAway(t, admin(t, addr), key) },
	}
	for _, mode := range []Mode{Advisory, Lease} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker { return open(t, addr, mode, nil) },
				locktest.WithSteal(steal[mode]))
		})
	}
}
