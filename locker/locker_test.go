package locker_test

import (
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// TestPromise holds Info.Promise to its documentation for the contracts
// the backends declare: a drift allowance off the TTL (Redlock), a TTL
// rounded up to whole seconds first (etcd), a session cap (ZooKeeper),
// none at all (the control).
func TestPromise(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name      string
		info      locker.Info
		ttl       time.Duration
		want, max time.Duration
	}{
		{"no drift", locker.Info{}, time.Second, time.Second, time.Second},
		{"redlock's drift", locker.Info{DriftRate: 0.01, Drift: 2 * ms}, time.Second, 988 * ms, time.Second},
		{"rounded up, then drift", locker.Info{TTLResolution: time.Second, DriftRate: 0.11, Drift: 2 * ms}, 1500 * ms, 2*time.Second - 220*ms - 2*ms, 2 * time.Second},
		{"a session caps a long TTL", locker.Info{Session: 3800 * ms}, 10 * time.Second, 3800 * ms, 3800 * ms},
		{"a session leaves a short TTL", locker.Info{Session: 3800 * ms}, time.Second, time.Second, time.Second},
		{"drift larger than the TTL", locker.Info{Drift: 2 * time.Second}, time.Second, 0, time.Second},
		{"no TTL", locker.Info{}, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.Promise(tc.ttl); got != tc.want {
				t.Errorf("Promise(%v) = %v, want %v", tc.ttl, got, tc.want)
			}
			if got := tc.info.MaxValidity(tc.ttl); got != tc.max {
				t.Errorf("MaxValidity(%v) = %v, want %v", tc.ttl, got, tc.max)
			}
		})
	}
}
