package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/remote"
)

// hostsFlags are run's flags for a run over an inventory's hosts.
type hostsFlags struct {
	inventory string
	binary    string
}

func (h *hostsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&h.inventory, "inventory", "", "run over the hosts of this inventory (YAML; see lockbench hosts check): servers, clients and faults on them, the judge here")
	fl.StringVar(&h.binary, "binary", "", "the static lockbench binary to upload to the client hosts (default: this one, if static)")
}

// dial loads the inventory and connects to its hosts, clearing what an
// earlier run left there.
func (h *hostsFlags) dial(ctx context.Context, log io.Writer) (*bench.Hosts, error) {
	inv, err := inventory.Load(h.inventory)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", bench.ErrConfig, err)
	}
	if err := inv.CheckBackends(backends.Names()); err != nil {
		return nil, fmt.Errorf("%w: %w", bench.ErrConfig, err)
	}
	hosts, err := bench.DialHosts(ctx, inv, bench.HostsOptions{Binary: h.binary, Log: log})
	if err != nil {
		return nil, err
	}
	for _, c := range inv.Hosts {
		fmt.Fprintf(log, "lockbench: host %s (%s): %s\n", c.Name, hosts.Host(c.Name).SSH, c.Roles())
	}
	return hosts, nil
}

// keepHostLogs brings the logs of the servers that ran on other hosts
// into the run dir, beside those of this machine's, once they are
// stopped.
func keepHostLogs(env *compose.Env, log io.Writer) {
	for _, n := range env.Nodes() {
		if _, local := n.Host().(remote.Local); local {
			continue
		}
		text := n.LogTail(4 << 20)
		if text == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(env.Dir, n.Name+".log"), []byte(text), 0o644); err != nil {
			fmt.Fprintf(log, "lockbench: the log of %s on %s: %v\n", n.Name, n.Host().Name(), err)
		}
	}
}

// readToken reads a judge's run token from path (lockbench judge
// --token-file wrote it).
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the judge's run token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the judge's run token: %s is empty", path)
	}
	return tok, nil
}
