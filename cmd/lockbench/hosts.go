package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/inventory"
)

func hostsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Work with the hosts of a run over several machines (an inventory file)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(hostsCheckCmd())
	return cmd
}

func hostsCheckCmd() *cobra.Command {
	var path string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check --inventory hosts.yaml",
		Short: "Verify that each host of an inventory can play its roles, before a run",
		Long: `check reaches every host of the inventory over SSH, as a run would, and verifies what its
roles need: the host key (against known_hosts or the key pinned in the inventory; an unknown or
changed key is refused), root or passwordless sudo, Linux on this binary's architecture, the
shell tools lockbench uses, ip with blackhole policy rules (partitions), each server's binary
(the inventory's, or its backend's usual one: redis-server, java; etcd-member is uploaded by the
run), the files it reads (ZooKeeper's jars from Debian's zookeeper package) and its data dir,
/dev/fuse (power loss) and gcc or a prebuilt clock preload (clock faults) on
server hosts, and that no port a role needs is taken. It prints one line per check and exits
non-zero when any fails, naming the host, the check and what is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("hosts check needs --inventory FILE")
			}
			inv, err := inventory.Load(path)
			if err != nil {
				return err
			}
			if err := inv.CheckBackends(backends.Names()); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			found := inventory.Check(ctx, inv, bench.ServerNeeds)
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			failed := map[string]int{}
			for _, f := range found {
				status := "ok"
				if !f.OK {
					status = "FAIL"
					failed[f.Host]++
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Host, f.Check, status, f.Detail)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(failed) > 0 {
				n := 0
				for _, c := range failed {
					n += c
				}
				return fmt.Errorf("%d of %d checks failed, on %d of %d hosts", n, len(found), len(failed), len(inv.Hosts))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "all %d hosts ready (%d checks)\n", len(inv.Hosts), len(found))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&path, "inventory", "", "the inventory (YAML) of the hosts (required)")
	fl.DurationVar(&timeout, "timeout", 2*time.Minute, "how long all the checks may take")
	return cmd
}
