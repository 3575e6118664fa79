package redlockbackend

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// Name is the name the library registers under.
const Name = "redlock"

func init() {
	backends.Register(backends.Descriptor{
		Name:    Name,
		Doc:     "lockbench's Redlock on five independent Redis masters, with fencing tokens, a restart quarantine and a fair hand-off",
		Open:    Open,
		Servers: backends.Servers{Kind: backends.Redis, Count: 5},
		// No Priority: no node is Redlock's favourite; each key's queue
		// and hand-off live on nodes the key's hash picks.
		// A node that lost its data sits out the largest max TTL its
		// clients recorded: the case's TTL, unless an earlier case on
		// these nodes took longer leases (nodes a fault restarted are
		// replaced before the next case, since Admit is set).
		CaseParams: func(ttl time.Duration) map[string]string {
			return map[string]string{"maxttl": ttl.String()}
		},
		Admit:        admit,
		AdmitCommand: bootstrapCommand,
		// Its client measures a lease's validity on the clock it is given.
		ClientClock: true,
		// Without the quarantine, a majority restarted empty grants held
		// keys again; with plain counters for tokens, nodes restarted
		// empty forget them: the suites run both for restarts.
		Variants: []backends.Variant{{}, {Params: "quarantine=false"}, {Params: "clockfloor=false"}},
		// Redlock's validity: TTL − elapsed − (TTL×drift + 2 ms), from the
		// start of the attempt that won (the drift param, DefaultDrift).
		Contract: func(_ time.Duration, params map[string]string) (locker.Info, error) {
			drift := redlock.DefaultDrift
			if v, ok := params["drift"]; ok {
				d, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return locker.Info{}, locker.Invalidf("param drift=%q: not a number", v)
				}
				drift = d
			}
			return locker.Info{DriftRate: drift, Drift: 2 * time.Millisecond}, nil
		},
		Probe: redis.Probe,
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
// On servers just created (the runner's, or an operator's --force) the
// bootstrap is forced: they are new although they have been up for less
// than the max TTL. On the user's servers it is not: nodes that may have
// lost a held lock within the max TTL are refused (redlock.ErrMaybeInUse).
// The runner calls it once per set of nodes, when it creates them; the
// clients of every case (separate processes) open Redlock without it.
func admit(cfg backends.Config, created bool) error {
	params := map[string]string{"bootstrap": "true"}
	if created {
		params["bootstrap"] = "force"
	}
	for k, v := range cfg.Params {
		if k == "quarantine" || k == "maxttl" || k == "keyprefix" {
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

// bootstrapCommand is `lockbench redlock bootstrap`: admit on the
// operator's nodes.
var bootstrapCommand = backends.AdmitCommand{
	Name:  "bootstrap",
	Short: "Admit brand-new Redis nodes to Redlock's quorum, once, where they are created",
	Long: `bootstrap admits brand-new Redis masters to the quorum of lockbench's Redlock
(backends/redlock), which every client of them uses at once. Until a node is admitted it does
not vote; left alone, it is admitted one max TTL after a client first finds it. New nodes
cannot be told from nodes that lost their data, so a new cluster needs this one explicit step,
taken by whoever creates the nodes, before any client takes a lock. It is what
redlock.(*Redlock).Bootstrap does, from the command line.

What it checks on every node, and refuses (admitting nothing) when it fails:
  - the node answers, with the credentials and TLS given, and lets Redlock's user run its
    scripts and INFO (an ACL refusal names what is missing);
  - every address is an independent server: two addresses of one server (one run_id), or two
    databases of one server, are refused;
  - maxmemory-policy is noeviction (or maxmemory is 0): a node that may evict lock keys is
    never admitted;
  - the node carries no Redlock state (an admission marker, records of grants) and no record
    of a loss seen by a client that used these nodes: nodes in use are never bootstrapped
    again (they, or the ones that lost their data, serve their quarantine);
  - unless --force: its server has been up for at least --maxttl and was never flushed
    (FLUSHALL, FLUSHDB). A node that restarted empty, or was flushed, while a lock was held
    looks new: only whoever created the nodes knows they are. --force admits such nodes; if
    they are not new but lost their data while a client held a lock, a forced bootstrap can
    let a second client be granted that lock while the first one's lease is valid.

Exit status 0 when the nodes were admitted, 1 when anything was refused or failed (nodes
already in use included: nothing to do).`,
	Example: `  lockbench redlock bootstrap --addrs 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379 --force
  lockbench redlock bootstrap --addrs ... --username locker --tls-ca ca.pem --maxttl 5m`,
	Params: map[string]string{
		"maxttl":    "the largest max TTL of the clients (WithMaxTTL, default 1m): nodes up for less are refused unless --force",
		"keyprefix": "the prefix of Redlock's own keys, if the clients set one (WithKeyPrefix; default \"\\x00redlock:\")",
	},
	Run: bootstrap,
}

// bootstrap runs redlock.Bootstrap on cfg's nodes (forced with force) and
// says what it did.
func bootstrap(ctx context.Context, cfg backends.Config, force bool, out io.Writer) error {
	if err := cfg.NeedAddrs(1); err != nil {
		return err
	}
	maxTTL, err := cfg.Duration("maxttl", redlock.DefaultMaxTTL)
	if err != nil {
		return err
	}
	clients := Clients(cfg)
	defer closeAll(clients)
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	if v, ok := cfg.Params["keyprefix"]; ok {
		opts = append(opts, redlock.WithKeyPrefix(v))
	}
	r, err := redlock.New(clients, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	var bopts []redlock.BootstrapOption
	if force {
		bopts = append(bopts, redlock.Force())
	}
	if err := r.Bootstrap(ctx, bopts...); err != nil {
		return fmt.Errorf("refused, nothing admitted: %w", err)
	}
	fmt.Fprintf(out, "admitted %d nodes to the quorum (%d of them must grant a lock): %v\n", len(cfg.Addrs), r.Quorum(), r.Info().Nodes)
	return nil
}
