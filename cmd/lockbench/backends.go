package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
)

func backendsCmd() *cobra.Command {
	var ep endpointFlags
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the backends and what each one's guarantee rests on (starts their servers to ask them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			external, err := ep.configs()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "lockbench-backends-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			env, err := compose.New(dir)
			if err != nil {
				return err
			}
			defer env.Close()
			clusters := bench.NewClusters(env, external)
			none, _ := nemesis.Parse("none")
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "BACKEND\tNODES\tQUORUM\tFENCING\tGUARANTEE")
			for _, name := range bench.Listed() {
				ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
				b, _ := bench.ParseBackend(name)
				_, cfg, err := clusters.Setup(ctx, b, none, results.DurabilityFast, locker.DefaultTTL)
				cancel()
				if err != nil {
					fmt.Fprintf(w, "%s\t\t\t\t(servers: %v)\n", name, err)
					continue
				}
				l, err := backends.Open(b.Name, cfg)
				if err != nil {
					fmt.Fprintf(w, "%s\t\t\t\t(open: %v)\n", name, err)
					continue
				}
				info := l.Info()
				l.Close()
				fmt.Fprintf(w, "%s\t%d\t%d\t%v\t%s\n", name, len(info.Nodes), info.Quorum, info.Fencing, info.Guarantee)
			}
			return w.Flush()
		},
	}
	ep.register(cmd.Flags())
	return cmd
}

func clusterCmd() *cobra.Command {
	var names []string
	var dir string
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start the servers of some backends on 127.0.0.1, print their addresses and wait for Ctrl-C",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				var err error
				if dir, err = os.MkdirTemp("", "lockbench-cluster-"); err != nil {
					return err
				}
			}
			env, err := compose.New(filepath.Clean(dir))
			if err != nil {
				return err
			}
			defer env.Close()
			clusters := bench.NewClusters(env, nil)
			none, _ := nemesis.Parse("none")
			for _, name := range names {
				b, err := bench.ParseBackend(name)
				if err != nil {
					return err
				}
				_, cfg, err := clusters.Setup(cmd.Context(), b, none, results.DurabilityFast, locker.DefaultTTL)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", name, strings.Join(cfg.Addrs, ","))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "servers under %s; Ctrl-C stops them\n", env.Dir)
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&names, "backend", nil, "backends whose servers to start (required)")
	cmd.Flags().StringVar(&dir, "dir", "", "run dir for data and logs (default: a temporary dir)")
	_ = cmd.MarkFlagRequired("backend")
	return cmd
}
