package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/remote"
)

// hostsFlags are run's flags for a run over an inventory's hosts.
type hostsFlags struct {
	inventory   string
	binary      string
	linkTimeout time.Duration
}

func (h *hostsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&h.inventory, "inventory", "", "run over the hosts of this inventory (YAML; see lockbench hosts check): servers, clients "+
		"and faults on them, the judge on the host given its role (else here)")
	fl.StringVar(&h.binary, "binary", "", "the static lockbench binary to upload to the client and judge hosts (default: this one, if static)")
	fl.DurationVar(&h.linkTimeout, "link-timeout", 15*time.Second, "with --inventory: a host whose link leaves keepalives (sent every third "+
		"of this) unanswered this long is lost, and the run stops")
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
	if h.linkTimeout < 3*time.Millisecond {
		return nil, fmt.Errorf("%w: --link-timeout %v: too short", bench.ErrConfig, h.linkTimeout)
	}
	hosts, err := bench.DialHosts(ctx, inv, bench.HostsOptions{Binary: h.binary, Log: log, KeepAlive: h.linkTimeout / 3})
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
