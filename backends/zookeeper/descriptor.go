package zookeeper

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/locker"
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
		Lease:    silentLease,
		Contract: contract,
		Probe:    Probe,
		Endpoints: backends.Endpoints{
			Flag:  "zookeeper",
			Usage: "the ZooKeeper ensemble (host:port of each server)",
			Auth:  backends.Auth{Flag: "zookeeper", Name: "ZooKeeper", User: "ZooKeeper digest auth user"},
		},
	})
}

// contract is what a grant of a case promises, declared rather than
// taken from the workers' report: the key is the holder's for the TTL,
// but no longer than its session less the client's margin (Info). The
// session is the one the case asks for (the session param), which
// lockbench's ensembles (minSessionTimeout 2 ticks, maxSessionTimeout
// 60 s) grant as asked; a server that negotiated another makes the
// workers' reports depart from this, which lockbench check finds.
func contract(_ time.Duration, params map[string]string) (locker.Info, error) {
	d := DefaultSession
	if s := params["session"]; s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return locker.Info{}, fmt.Errorf("session %q: want a positive duration", s)
		}
	}
	return locker.Info{Session: d - margin(d)}, nil
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
