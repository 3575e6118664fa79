package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/server"
)

// The faults that may cost servers their data, each on a majority of the
// nodes (the single server of a one-node backend) while a holder is
// inside its section, each read back as what every target held of the
// held key before and after: restart (an orderly one), crash (the
// process dies, the kernel keeps what it wrote) and power loss (the
// machine dies, and with it every write not synced).

var restart = &Scenario{
	Name: "restart",
	span: instantly,
	Doc: "a random majority of the nodes (the single server of a one-node backend) is shut down in order (SIGTERM) and started again while " +
		"a holder is inside its section: " +
		"it keeps what it persists at shutdown (nothing for Redis without persistence, everything elsewhere)",
	MinTTL:   2 * time.Second,
	Requires: Servers,
	plan:     downAndUp("restarted", func(nodes []Node) error { return eachErr(nodes, Node.Stop) }),
}

var crash = &Scenario{
	Name: "crash",
	span: instantly,
	Doc: "a random majority of the nodes (the single server of a one-node backend) is killed (SIGKILL) and started again on the same disk " +
		"while a holder is inside its section: " +
		"the kernel kept every write the server made, synced or not (a process crash, not a machine's)",
	MinTTL:   2 * time.Second,
	Requires: Servers,
	plan:     downAndUp("crashed", killAll),
}

var powerLoss = &Scenario{
	Name: "power-loss",
	span: powerLossSpan,
	Doc: "a random majority of the nodes (the single server of a one-node backend) loses power while a holder is inside its section: " +
		"every write not synced is lost (their data sits on a lazy filesystem), then they start again, at once or after a delay",
	Params: map[string]string{"delay": "how long the nodes stay down, in key lifetimes (default 0: they start at once; 1 is the Redlock " +
		"spec's delayed restart)"},
	MinTTL:   2 * time.Second,
	Needs:    Needs{LazyFS: true},
	check:    func(v url.Values) error { return checkNonNegative(v, "delay") },
	Requires: Servers | LosableData,
	plan: func(e Env) plan {
		delay := time.Duration(nonNegative(e.Params, "delay", 0) * float64(max(e.KeyLife, e.Spec.TTL)))
		label := "lost power"
		if delay > 0 {
			label += fmt.Sprintf(", back after %v", delay)
		}
		return e.onMajority(label, func(ctx context.Context, a attempt) (string, error) {
			dropped, err := powerLossAll(a.nodes)
			if err != nil {
				return "", err
			}
			var out []string
			for i, n := range a.nodes {
				out = append(out, fmt.Sprintf("%s dropped %d unsynced bytes in %d files", n, dropped[i].Bytes, dropped[i].Files))
			}
			if delay > 0 {
				sleepUntil(ctx, time.Now().Add(delay))
			}
			return strings.Join(out, "; "), startAgain(ctx, a.nodes)
		})
	},
}

// powerLossAll cuts the power of the nodes at once: all die before any
// loses its unsynced writes (Disk.PowerLoss). It returns what each lost,
// in the order of nodes. They stay down; startAll brings them back.
func powerLossAll(nodes []Node) ([]server.Unsynced, error) {
	disks := make([]Disk, len(nodes))
	for i, n := range nodes {
		d, ok := n.(Disk)
		if !ok || !d.HasLazyFS() {
			return nil, fmt.Errorf("%s has no lazy filesystem: a power loss cannot drop its unsynced writes", n)
		}
		disks[i] = d
	}
	if err := killAll(nodes); err != nil {
		return nil, err
	}
	lost := make([]server.Unsynced, len(nodes))
	err := eachIndexed(nodes, func(i int, _ Node) error {
		var err error
		lost[i], err = disks[i].PowerLoss()
		return err
	})
	return lost, err
}

// startAgain starts the nodes a fault brought down and tells what their
// failure to come back means. A server that exited (server.ErrExited)
// refused what its disk kept: that is the fault's outcome, and the servers
// are lost (its log's last lines say why). One still starting when the
// wait ended (server.ErrNotReady) was slow — a loaded machine, a log to
// replay — which is the harness giving up, not the server refusing: the
// injection failed, and says how long it waited.
func startAgain(ctx context.Context, nodes []Node) error {
	err := startAll(ctx, nodes)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, server.ErrExited):
		return lost{err}
	case errors.Is(err, server.ErrNotReady):
		return fmt.Errorf("slow to start again, not refused: %w", err)
	}
	return err
}

// downAndUp plans a fault that takes a random majority of the nodes down
// with down and starts them again at once on the same disk (startAgain):
// restart and crash, which differ only in how the servers go down.
func downAndUp(label string, down func([]Node) error) func(Env) plan {
	return func(e Env) plan {
		return e.onMajority(label, func(ctx context.Context, a attempt) (string, error) {
			if err := down(a.nodes); err != nil {
				return "", err
			}
			return "", startAgain(ctx, a.nodes)
		})
	}
}

// onMajority drives the strike restart, crash and power loss share: on a
// random majority of the nodes, while a holder that holds for ¾ of the TTL
// is inside its section, op acts on them (after the strike is marked) and
// the held key is read back across it (keysAcross). The injection tests
// exclusion only if, once op is done (the nodes back), another client
// asks for the held key, or is granted it, while the section is still
// open; otherwise recovery outlasted the section (strike.danger).
func (e Env) onMajority(label string, op func(ctx context.Context, a attempt) (string, error)) plan {
	return e.drive(strike{
		label: label, hold: e.Spec.TTL * 3 / 4, exclusion: true, danger: true,
		pick: func(context.Context, int) ([]Node, error) { return e.majority(), nil },
		do: e.keysAcross(func(ctx context.Context, a attempt) (string, error) {
			a.struck()
			return op(ctx, a)
		}),
	})
}

// powerLossSpan is how long one power loss takes with its gap: the delay
// before the nodes start again, and the lease.
func powerLossSpan(p url.Values, _ Shape, lease time.Duration) time.Duration {
	return time.Duration(nonNegative(p, "delay", 0)*float64(lease)) + lease
}

// keysAcross is the strike of a fault that may lose or expire keys (op),
// read back from the servers: what each target held of the key the strike
// met (of the case's keys when it met none) before op, and after it. op
// says in words what else it did; its lost or untested error passes
// through.
func (e Env) keysAcross(op func(ctx context.Context, a attempt) (string, error)) func(context.Context, attempt) (string, error) {
	return func(ctx context.Context, a attempt) (string, error) {
		if e.Target.Probe == nil {
			return "", errors.New("the backend has no probe: what the fault did to its keys cannot be read back")
		}
		before, err := e.stored(ctx, a.nodes, a.substr)
		if err != nil {
			return "", fmt.Errorf("reading the keys before the fault: %w", err)
		}
		pids := make([]int, len(a.nodes))
		for i, n := range a.nodes {
			pids[i] = n.PID()
		}
		did, opErr := op(ctx, a)
		var (
			u untested
			l lost
		)
		switch {
		case errors.As(opErr, &l):
			return did, opErr
		case opErr != nil && !errors.As(opErr, &u):
			return "", opErr
		}
		after, err := e.stored(ctx, a.nodes, a.substr)
		if err != nil {
			return "", fmt.Errorf("reading the keys after the fault: %w", err)
		}
		what := "held key"
		if a.key == "" {
			what = "the case's keys"
		}
		out := []string{}
		if did != "" {
			out = append(out, did)
		}
		for i, n := range a.nodes {
			proc := ""
			if pid := n.PID(); pid != pids[i] {
				proc = fmt.Sprintf(" (pid %d → %d)", pids[i], pid)
			}
			out = append(out, fmt.Sprintf("%s%s: %s %v before; %d of them kept as they were; %v "+
				"after", n, proc, what, before[i], after[i].Kept(before[i]), after[i]))
		}
		return strings.Join(out, "; "), opErr
	}
}

// stored reads what each node holds of the keys containing substr, at
// once.
func (e Env) stored(ctx context.Context, nodes []Node, substr string) ([]Stored, error) {
	out := make([]Stored, len(nodes))
	err := eachIndexed(nodes, func(i int, n Node) error {
		var err error
		out[i], err = e.Target.Probe(ctx, n, substr)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		return nil
	})
	return out, err
}

// nonNegative returns the param name as a number of at least 0, or def.
func nonNegative(v url.Values, name string, def float64) float64 {
	x, err := strconv.ParseFloat(v.Get(name), 64)
	if err != nil || !(x >= 0) {
		return def
	}
	return x
}

// checkNonNegative refuses a param that is not a number from 0 to 100.
func checkNonNegative(v url.Values, name string) error {
	if s := v.Get(name); s != "" {
		if x, err := strconv.ParseFloat(s, 64); err != nil || !(x >= 0) || x > 100 {
			return fmt.Errorf("%s=%q: want a number from 0 to 100", name, s)
		}
	}
	return nil
}
