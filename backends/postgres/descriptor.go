package postgres

import (
	"time"

	"github.com/lockbench/lockbench/backends"
)

func init() {
	backends.Register(backends.Descriptor{
		Name:    "postgres",
		Doc:     "PostgreSQL: session advisory locks (mode=advisory), or a fenced lease table (mode=lease, the default)",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Postgres, Count: 1},
		Probe:   Probe,
		Lease:   silentLease,
		// The two modes are two locks: the suites run both, and list the
		// advisory one beside the plain backend (its guarantee differs: no
		// TTL on the server, no fencing). Advisory locks with a keepalive
		// bound are a third: the server frees a cut-off holder's lock
		// within it rather than hours later, which only a partition
		// tells, so the full suite runs them under partitions alone.
		Variants: []backends.Variant{
			{Params: "mode=" + string(Advisory), Listed: true},
			{Params: "mode=" + string(Lease)},
			{Params: "mode=" + string(Advisory) + "&keepalive=" + CaseKeepalive.String(), Listed: true},
		},
		NotApplicable: map[string]string{
			"failover":         "one PostgreSQL server without replicas has nothing to fail over",
			"crash-minority":   "needs a cluster of at least 3 nodes: one PostgreSQL server has no minority to crash (its loss is what restart and server-pause do)",
			"partition-leader": "one PostgreSQL server has no peers: there is no leader to cut off from its followers",
			"partition-halves": "one PostgreSQL server has no peers to be split from",
			"leader-kill":      "one PostgreSQL server elects no leader (its loss is what restart and server-pause do)",
		},
		Endpoints: backends.Endpoints{
			Flag:  "postgres",
			Usage: "the PostgreSQL server of the postgres backend (host:port, or a postgres:// URL)",
			Auth:  backends.Auth{Flag: "postgres", Name: "PostgreSQL", User: "PostgreSQL user (default postgres)", TLS: "the PostgreSQL server"},
		},
	})
}

// CaseKeepalive is the keepalive bound of the advisory variant the full
// suite puts through partitions: the shortest the server's whole-second
// settings allow (MinKeepalive), so that a partition of a few seconds
// outlasts it.
const CaseKeepalive = MinKeepalive

// keepaliveSlack is what the server may take beyond a keepalive bound to
// end a silent session: the bound counts from when it last heard from the
// client, which in a busy case is the moment of the cut, and its kernel's
// timers fire a little late (measured: 3.1 s after the grant for a 3 s
// bound). A partition sized to the bound alone healed as the sessions
// died, and they lived.
const keepaliveSlack = time.Second

// silentLease is how long the server keeps the lock of a holder that
// went silent, for a lease of ttl: the TTL (the holder's client unlocks at
// it, if it can), or, for an advisory lock whose sessions have a
// keepalive bound, that bound and keepaliveSlack when they are longer — a
// cut-off holder's session, and its lock, last that long on the server.
// (Without a bound a cut-off holder's lock lasts as long as the server's
// keepalives let it, hours by default; no fault window is sized from
// that.)
func silentLease(ttl time.Duration, params map[string]string) time.Duration {
	if params["mode"] != string(Advisory) {
		return ttl
	}
	d, err := time.ParseDuration(params["keepalive"])
	if err != nil {
		return ttl
	}
	return max(ttl, d+keepaliveSlack)
}
