package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/backends/redlock/redlockbackend"
)

// redlockCmd groups what operators of lockbench's Redlock library do
// outside their programs: for now, admit a new cluster.
func redlockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "redlock",
		Short: "Operate the Redis nodes of lockbench's Redlock library (bootstrap a new cluster)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(redlockBootstrapCmd())
	return cmd
}

func redlockBootstrapCmd() *cobra.Command {
	var (
		addrs          []string
		user, password string
		tlsf           tlsFlags
		maxTTL         time.Duration
		force          bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bootstrap --addrs HOST:PORT,...",
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
  - unless --force: its server has been up for at least --max-ttl and was never flushed
    (FLUSHALL, FLUSHDB). A node that restarted empty, or was flushed, while a lock was held
    looks new: only whoever created the nodes knows they are. --force admits such nodes; if
    they are not new but lost their data while a client held a lock, a forced bootstrap can
    let a second client be granted that lock while the first one's lease is valid.

Exit status 0 when the nodes were admitted, 1 when anything was refused or failed.`,
		Example: `  lockbench redlock bootstrap --addrs 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379 --force
  lockbench redlock bootstrap --addrs ... --username locker --tls-ca ca.pem --max-ttl 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(addrs) == 0 {
				return errors.New("redlock bootstrap: --addrs is required (the Redis masters, host:port each)")
			}
			files, tlsConfig, err := tlsf.files()
			if err != nil {
				return fmt.Errorf("redlock bootstrap: TLS: %w", err)
			}
			clients := redlockbackend.Clients(backends.Config{Addrs: addrs, Username: user, Password: password, TLS: tlsConfig, TLSFiles: files})
			defer func() {
				for _, c := range clients {
					c.Close()
				}
			}()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			rl, err := redlock.New(clients, redlock.WithMaxTTL(maxTTL), redlock.WithLogger(log))
			if err != nil {
				return fmt.Errorf("redlock bootstrap: %w", err)
			}
			defer rl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var opts []redlock.BootstrapOption
			if force {
				opts = append(opts, redlock.Force())
			}
			if err := rl.Bootstrap(ctx, opts...); err != nil {
				return fmt.Errorf("redlock bootstrap refused, nothing admitted: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "admitted %d nodes to the quorum (%d of them must grant a lock): %v\n", len(addrs), rl.Quorum(), rl.Info().Nodes)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&addrs, "addrs", nil, "the independent Redis masters (host:port, comma-separated)")
	fl.StringVar(&user, "username", "", "Redis ACL user")
	fl.StringVar(&password, "password", os.Getenv("LOCKBENCH_REDIS_PASSWORD"), "Redis password (default $LOCKBENCH_REDIS_PASSWORD)")
	fl.StringVar(&tlsf.ca, "tls-ca", "", "CA certificate (PEM) to verify the nodes; turns TLS on")
	fl.StringVar(&tlsf.cert, "tls-cert", "", "client certificate (PEM); turns TLS on")
	fl.StringVar(&tlsf.key, "tls-key", "", "client key (PEM)")
	fl.BoolVar(&tlsf.insecure, "tls-insecure", false, "use TLS without verifying the nodes")
	fl.DurationVar(&maxTTL, "max-ttl", redlock.DefaultMaxTTL, "the largest max TTL of the clients (WithMaxTTL): nodes up for less are refused unless --force")
	fl.BoolVar(&force, "force", false, "admit nodes up for less than --max-ttl, or flushed: nodes you have just created (see above for the risk)")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
