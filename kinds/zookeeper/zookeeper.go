// Package zookeeper is the server kind of a ZooKeeper ensemble: it starts
// an ensemble on compose's toolkit (StartEnsemble, Ensemble) and
// registers what the ensemble offers the faults.
package zookeeper

import (
	"context"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/nemesis"
)

func init() {
	kinds.Register(kinds.Kind{Name: backends.ZooKeeper, Offers: Offers, Start: Start, StartCost: kinds.Once(6 * time.Second),
		PeerNetwork: true, Unsupported: kinds.NoPeriodic(backends.ZooKeeper), Versions: Versions,
		OnHost: func() inventory.Needs {
			return inventory.Needs{Binary: DefaultPrograms().Java, Files: DefaultPrograms().Classpath}
		}})
}

// Versions reports the versions of this machine's java and of Debian's
// zookeeper package, which the servers run.
func Versions(ctx context.Context) map[string]string {
	v := map[string]string{}
	if java, ok := kinds.Probe(ctx, `version "([^"]+)"`, DefaultPrograms().Java, "-version"); ok {
		v["java"] = java
	}
	if zk, ok := kinds.Probe(ctx, `^(\S+)$`, "dpkg-query", "-W", "-f=${Version}", "zookeeper"); ok {
		v["zookeeper"] = zk
	}
	return v
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

// Start starts an ensemble of spec.Count servers: here behind proxies,
// its members in network namespaces of their own when this machine
// allows it, or on the hosts spec.On names.
func Start(ctx context.Context, env *compose.Env, spec kinds.Spec) (*kinds.Cluster, error) {
	cs := spec.Compose()
	if spec.Here() {
		cs.Netns = kinds.PeersCut(spec)
	}
	z, err := StartEnsemble(ctx, env, cs, Options{})
	if err != nil {
		return nil, err
	}
	return kinds.Elected(z.Nodes, z, spec), nil
}
