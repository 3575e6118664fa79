// Package etcd is the server kind of an etcd cluster: it registers what
// a cluster of members offers the faults.
package etcd

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.Etcd, Offers: Offers})
}

// NoClock is why an etcd member's clock cannot be moved: the one place
// lockbench says so.
const NoClock = "etcd leases count down on the leader's monotonic clock (not read off a wall clock), which no wall-clock jump moves; " +
	"and no clock preload reaches an etcd member: a Go program reads its clocks through the vDSO, not libc " +
	"(Chaos Mesh's TimeChaos patches the vDSO for that), so how etcd depends on a clock's jump or rate was not measured"

// Offers is what a cluster of n members offers the faults: a leader they
// elect, links between them to cut, and every node fault but the clock's
// (NoClock); it has no Sentinel to fail over.
func Offers(n int) kinds.Offer {
	o := kinds.Quorum(n, "etcd has no Sentinel to fail over: a leader's loss is what leader-kill and partition-leader do")
	o.Why[nemesis.MovableClock] = NoClock
	return o
}
