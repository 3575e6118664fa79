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
	for _, tc := range []struct {
		mode   Mode
		params map[string]string
	}{
		{Advisory, nil},
		{Lease, nil},
		// Leases that promise no more than the keepalive bound.
		{Advisory, map[string]string{"keepalive": "3s"}},
	} {
		name := "mode=" + string(tc.mode)
		if k, ok := tc.params["keepalive"]; ok {
			name += "&keepalive=" + k
		}
		t.Run(name, func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker { return open(t, addr, tc.mode, tc.params) },
				locktest.WithSteal(steal[tc.mode]))
		})
	}
}
