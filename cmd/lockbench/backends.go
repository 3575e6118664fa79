package main

import (
	"context"
	"fmt"
	"io"
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
	var probe bool
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "List the backends and what each one's guarantee rests on (from their descriptors; --probe asks live servers)",
		Long: `backends lists every registered backend, and the variants the suites describe apart, with the
servers it needs, its nodes, quorum, whether its leases carry fencing tokens, and what its mutual
exclusion rests on. By default it reads what each backend declares, without starting a server:
it opens each one against addresses where nothing listens, which costs no connection. --probe
starts each backend's servers on 127.0.0.1 (or uses the endpoints given) and asks the live lock
instead, as a run would.`,
		Example: `  lockbench backends
  lockbench backends --probe
  lockbench backends --probe --redis-addrs 10.0.0.1:6379`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !probe {
				return listBackends(cmd.OutOrStdout())
			}
			return probeBackends(cmd, ep)
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", false, "start each backend's servers (or use the endpoints given) and ask the live lock")
	ep.register(cmd.Flags())
	return cmd
}

// listBackends writes the table of the registered backends from their
// descriptors, opening each Locker on unreachable addresses to read its
// Info: no server starts, nothing is dialled that answers.
func listBackends(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BACKEND\tNODES\tQUORUM\tFENCING\tSERVERS\tGUARANTEE")
	for _, name := range bench.Listed() {
		b, err := bench.ParseBackend(name)
		if err != nil {
			return err
		}
		info, err := declared(b)
		if err != nil {
			fmt.Fprintf(w, "%s\t\t\t\t%s\t%s (its client connects as it opens: --probe asks a live one)\n",
				name, b.Descriptor.Servers, b.Descriptor.Doc)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%v\t%s\t%s\n", name, len(info.Nodes), info.Quorum, info.Fencing, b.Descriptor.Servers, info.Guarantee)
	}
	return w.Flush()
}

// declared returns the Info of backend b opened on placeholder addresses,
// one per server its descriptor declares (ports 1, 2, … of the loopback,
// where nothing listens, so a client that dials at once fails at once),
// within a few seconds (a client
// library that insists on connecting is abandoned, with an error).
func declared(b bench.Backend) (locker.Info, error) {
	cfg := backends.Config{Params: b.Descriptor.ParamsFor(locker.DefaultTTL, b.Params)}
	for i := range b.Descriptor.Servers.Count {
		cfg.Addrs = append(cfg.Addrs, fmt.Sprintf("127.0.0.1:%d", i+1))
	}
	if p := b.Descriptor.Servers.MasterParam; p != "" && cfg.Params[p] == "" {
		cfg.Params[p] = "mymaster"
	}
	type opened struct {
		info locker.Info
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		l, err := backends.Open(b.Name, cfg)
		if err != nil {
			done <- opened{err: err}
			return
		}
		info := l.Info()
		_ = l.Close()
		done <- opened{info: info}
	}()
	select {
	case o := <-done:
		return o.info, o.err
	case <-time.After(2 * time.Second):
		return locker.Info{}, fmt.Errorf("backend %s: its client would not open without a server", b.Spec)
	}
}

// probeBackends starts each listed backend's servers (or uses the
// endpoints of ep) and writes the table of what each live lock says.
func probeBackends(cmd *cobra.Command, ep endpointFlags) error {
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
