package redlockbackend

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
)

// Name is the name the library registers under.
const Name = "redlock"

func init() {
	backends.Register(backends.Descriptor{
		Name:    Name,
		Doc:     "lockbench's Redlock on five independent Redis masters, with fencing tokens, a restart quarantine and a fair hand-off",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Redis, Count: 5},
		// The first node of its queue majority: where the fast path and
		// the hand-off live.
		Priority: []int{0},
		// A node that lost its data sits out the largest max TTL its
		// clients recorded: the case's TTL, unless an earlier case on
		// these nodes took longer leases (nodes a fault restarted are
		// replaced before the next case, since Admit is set).
		CaseParams: func(ttl time.Duration) map[string]string {
			return map[string]string{"maxttl": ttl.String()}
		},
		Admit: admit,
		Variants: []backends.Variant{
			{Suites: backends.AllSuites},
			// Without the quarantine, a majority restarted empty grants
			// held keys again; with plain counters for tokens, nodes
			// restarted empty forget them: both are there for restarts.
			{Params: "quarantine=false", Suites: backends.AllSuites, Faults: []string{"restart"}},
			{Params: "clockfloor=false", Suites: backends.DefaultSuite, Faults: []string{"restart"}},
		},
		NotApplicable: redis.NotApplicable(5),
		Probe:         redis.Probe,
		Endpoints: backends.Endpoints{
			Flag:  Name,
			Usage: "the independent Redis masters of redlock",
			Auth:  redis.Auth,
		},
	})
}

// admit lets Redlock's clients use new nodes at once (redlock.Bootstrap,
// through the bootstrap param), instead of each node serving a quarantine
// of one max TTL after the first client finds it: it opens Redlock on
// cfg's nodes with bootstrap (which admits nothing on nodes already in
// use), keeping only cfg's quarantine and maxttl params, and closes it.
// The runner calls it once per set of nodes, when it creates them; the
// clients of every case (separate processes) open Redlock without it.
func admit(cfg backends.Config) error {
	params := map[string]string{"bootstrap": "true"}
	for k, v := range cfg.Params {
		if k == "quarantine" || k == "maxttl" {
			params[k] = v
		}
	}
	cfg.Params = params
	l, err := backends.Open(Name, cfg)
	if err != nil {
		return fmt.Errorf("admit the Redlock nodes: %w", err)
	}
	return l.Close()
}
