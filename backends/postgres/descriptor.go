package postgres

import "github.com/lockbench/lockbench/backends"

func init() {
	backends.Register(backends.Descriptor{
		Name:    "postgres",
		Doc:     "PostgreSQL: session advisory locks (mode=advisory), or a fenced lease table (mode=lease, the default)",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Postgres, Count: 1},
		Probe:   Probe,
		// The two modes are two locks: the suites run both, and list the
		// advisory one beside the plain backend (its guarantee differs: no
		// TTL on the server, no fencing).
		Variants: []backends.Variant{
			{Params: "mode=" + string(Advisory), Listed: true, Suites: backends.AllSuites},
			{Params: "mode=" + string(Lease), Suites: backends.AllSuites},
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
