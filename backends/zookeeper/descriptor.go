package zookeeper

import (
	"time"

	"github.com/lockbench/lockbench/backends"
)

// MinCaseSession is the shortest session a lockbench case gives its
// clients (a case's TTL, but no shorter): longer than an election of
// lockbench's three-server ensemble (1.3–1.8 s with a 200 ms tick). With
// 1 s sessions a leader's death expired every session, and the clients did
// not get the lock again for the rest of the case.
const MinCaseSession = 2 * time.Second

func init() {
	backends.Register(backends.Descriptor{
		Name:    "zookeeper",
		Doc:     "ZooKeeper ephemeral sequential znodes on a three-server ensemble, the sequence number as fencing token",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.ZooKeeper, Count: 3},
		// A ZooKeeper lease lives as long as its session: the case's TTL,
		// but no shorter than an election takes.
		CaseParams: func(ttl time.Duration) map[string]string {
			return map[string]string{"session": max(ttl, MinCaseSession).String()}
		},
		Lease: silentLease,
		Probe: Probe,
		Endpoints: backends.Endpoints{
			Flag:  "zookeeper",
			Usage: "the ZooKeeper ensemble (host:port of each server)",
			Auth:  backends.Auth{Flag: "zookeeper", Name: "ZooKeeper", User: "ZooKeeper digest auth user"},
		},
	})
}

// silentLease is how long the ensemble keeps the znodes of a holder that went
// silent: its session timeout (the session param), or the TTL when that
// is longer (the client ends a lease at its TTL, but only a live client
// can).
func silentLease(ttl time.Duration, params map[string]string) time.Duration {
	if d, err := time.ParseDuration(params["session"]); err == nil {
		return max(ttl, d)
	}
	return max(ttl, DefaultSession)
}
