// Package zookeeper is the server kind of a ZooKeeper ensemble: it
// registers what an ensemble offers the faults.
package zookeeper

import (
	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.ZooKeeper, Offers: Offers})
}

// Offers is what an ensemble of n servers offers the faults: a leader
// they elect, links between them to cut, and every node fault, its
// clock's included (a ZooKeeper server is a Java program, which reads its
// wall clock through libc); it has no Sentinel to fail over.
func Offers(n int) kinds.Offer {
	o := kinds.Quorum(n, "ZooKeeper has no Sentinel to fail over: a leader's loss is what leader-kill and partition-leader do")
	o.Caps |= nemesis.MovableClock
	return o
}
