// Package etcd is the server kind of an etcd cluster: it starts a
// cluster of members on compose's toolkit (StartCluster, Cluster) and
// registers what the cluster offers the faults.
package etcd

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.Etcd, Offers: Offers, Start: Start, StartCost: kinds.Once(4 * time.Second),
		PeerNetwork: true, Unsupported: kinds.NoPeriodic(backends.Etcd), Program: Member, Versions: Versions,
		OnHost: func() inventory.Needs { return inventory.Needs{Uploaded: "etcd-member"} }})
}

// Versions reports the etcd version the members run: the module the
// running binary was built with, which `go build` of cmd/etcd-member
// shares.
func Versions(context.Context) map[string]string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "go.etcd.io/etcd/client/v3" {
				return map[string]string{"etcd": d.Version}
			}
		}
	}
	return nil
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

// Start starts a cluster of spec.Count members: here behind proxies, in
// network namespaces of their own when this machine allows it, or on the
// hosts spec.On names (each running the etcd-member the run uploaded). It
// takes no clock preload (NoClock).
func Start(ctx context.Context, env *compose.Env, spec kinds.Spec) (*kinds.Cluster, error) {
	if spec.Needs.FakeClock {
		return nil, fmt.Errorf("etcd: %s", NoClock)
	}
	cs := spec.Compose()
	if spec.Here() {
		cs.Netns = kinds.PeersCut(spec)
	}
	e, err := StartCluster(ctx, env, cs, Options{})
	if err != nil {
		return nil, err
	}
	return kinds.Elected(e.Nodes, e, spec), nil
}
