package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/results"
)

// TestVersion checks that --version names the module version, the commit
// (or says it is unknown) and the Go it was built with.
func TestVersion(t *testing.T) {
	stdout, _, err := lockbench(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout, "lockbench ") || !strings.Contains(stdout, "commit") || !strings.Contains(stdout, runtime.Version()) {
		t.Errorf("--version printed %q, want lockbench, its version, its commit and %s", stdout, runtime.Version())
	}
}

// TestBackendsFromDescriptors lists the backends without starting a
// server: a row for every backend and listed variant, in under 3 s,
// with what each declares (Redlock: 5 nodes, quorum 3, fencing).
func TestBackendsFromDescriptors(t *testing.T) {
	start := time.Now()
	stdout, _, err := lockbench(t, "backends")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > 3*time.Second {
		t.Errorf("lockbench backends took %v, want under 3 s", took)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if !strings.HasPrefix(lines[0], "BACKEND") {
		t.Fatalf("no header:\n%s", stdout)
	}
	rows := map[string][]string{}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		rows[fields[0]] = fields
	}
	for _, name := range bench.Listed() {
		if _, ok := rows[name]; !ok {
			t.Errorf("no row for %s in:\n%s", name, stdout)
		}
	}
	for name, want := range map[string]string{
		"redlock": "5 3 true redis×5",
		"redsync": "5 3 false redis×5",
		"etcd":    "3 2 true etcd×3",
		"noop":    "0 0 false no",
	} {
		if got := rows[name]; len(got) < 5 || strings.Join(got[1:5], " ") != want {
			t.Errorf("%s: %v, want nodes, quorum, fencing, servers %q", name, got, want)
		}
	}
}

// TestCountsRefused checks that counts that make no sense are refused
// before anything runs, naming the value.
func TestCountsRefused(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--injections", "-2", "--injections -2"},
		{"--injections", "0", "--injections 0"},
		{"--keys", "-1", "--keys -1"},
		{"--trials", "-3", "--trials -3"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, _, err := lockbench(t, "run", "--backend", "noop", tc.flag, tc.value, "--out", out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want one naming %q", tc.flag, tc.value, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s %s: the run started", tc.flag, tc.value)
		}
	}
}

// TestCheckUnreadable checks that check on a dir that does not exist, or
// without a readable results.json, exits 2 (the records cannot be
// trusted), not 1 (a lock broke), also with --json, which says so.
func TestCheckUnreadable(t *testing.T) {
	empty := t.TempDir()
	garbled := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbled, "results.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "nosuch"), empty, garbled} {
		_, _, err := lockbench(t, "check", dir)
		if got := exitOf(err); got != exitUntrusted {
			t.Errorf("check %s: exit %d (%v), want %d", dir, got, err, exitUntrusted)
		}
		stdout, _, err := lockbench(t, "check", "--json", dir)
		if got := exitOf(err); got != exitUntrusted {
			t.Errorf("check --json %s: exit %d (%v), want %d", dir, got, err, exitUntrusted)
		}
		var c checked
		if err := json.Unmarshal([]byte(stdout), &c); err != nil || c.Exit != exitUntrusted || c.Error == "" {
			t.Errorf("check --json %s wrote %q (%v), want exit %d and the error", dir, stdout, err, exitUntrusted)
		}
	}
}

// TestCheckJSON re-checks a run of the control (noop: it excludes nobody)
// as JSON: one entry per case, with its counts and verdicts, the overlaps
// the control makes, and exit 0 as the lines' check says.
func TestCheckJSON(t *testing.T) {
	dir, f := runFor(t, "--backend", "noop", "--clients", "4", "--duration", "300ms")
	stdout, _, err := lockbench(t, "check", "--json", dir)
	if err != nil {
		t.Fatalf("check --json: %v\n%s", err, stdout)
	}
	var c checked
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("check --json wrote no JSON: %v\n%s", err, stdout)
	}
	if c.Exit != 0 || len(c.Cases) != len(f.Cases) || c.Histories == 0 {
		t.Fatalf("check --json: exit %d, %d cases, %d histories; want 0, %d cases, histories", c.Exit, len(c.Cases), c.Histories, len(f.Cases))
	}
	for i, cc := range c.Cases {
		if cc.Report == nil || cc.Report.Overlaps != f.Cases[i].Overlaps || cc.Report.Overlaps == 0 || cc.Linearizable == "" {
			t.Errorf("case %s: %+v, want the control's %d overlaps and a verdict", cc.Name, cc.Report, f.Cases[i].Overlaps)
		}
	}
}

// TestUnstartedBackendFailsTheRun runs a backend whose servers cannot
// start (redis-server is not where the redis kind looks) beside the control:
// the run goes on, keeps the control's case, and exits non-zero naming
// the backend at the end — unless --keep-going, which says it still.
func TestUnstartedBackendFailsTheRun(t *testing.T) {
	t.Setenv(redis.ServerEnv, filepath.Join(t.TempDir(), "no-redis-server"))
	for _, keepGoing := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"run", "--backend", "redis,noop", "--duration", "200ms", "--out", dir, "--no-report"}
		if keepGoing {
			args = append(args, "--keep-going")
		}
		_, stderr, err := lockbench(t, args...)
		switch {
		case !keepGoing && (err == nil || !strings.Contains(err.Error(), "servers would not start (redis)")):
			t.Errorf("run: error %v, want one naming redis's servers", err)
		case keepGoing && err != nil:
			t.Errorf("run --keep-going: %v, want exit 0", err)
		case keepGoing && !strings.Contains(stderr, "servers would not start (redis)"):
			t.Errorf("run --keep-going does not say at the end what was not run:\n%s", stderr)
		}
		f, err := results.Read(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Cases) != 1 || f.Cases[0].Backend != "noop" || len(f.Skipped) != 1 || f.Skipped[0].Backend != "redis" {
			t.Errorf("keep-going=%v: %d cases, skipped %+v: want noop's case and redis skipped", keepGoing, len(f.Cases), f.Skipped)
		}
	}
}

// lineWriter hands each line written to it to a channel, so that a test
// waits for lines rather than for time.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w <- l
	}
	return len(p), nil
}

var _ io.Writer = lineWriter(nil)

// TestTickerLines follows a run of 4 cases without a terminal: before
// the first case ends the line says where it is and that no estimate
// exists yet; after two have ended, it says case 3 of 4 and a time left.
func TestTickerLines(t *testing.T) {
	lines := make(lineWriter, 100)
	tk := startTicker(lines, 4, 5*time.Millisecond)
	t.Cleanup(tk.Stop)
	var c bench.Case
	c.Backend, _ = bench.ParseBackend("noop")
	tk.event(bench.Event{Index: 0, Total: 4, Case: c})
	if l := <-lines; !strings.Contains(l, "case 1 of 4") || !strings.Contains(l, "elapsed") || !strings.Contains(l, "estimate after the first case") {
		t.Errorf("first line %q", l)
	}
	for i := range 2 {
		tk.event(bench.Event{Index: i, Total: 4, Case: c, Skipped: os.ErrNotExist})
		tk.event(bench.Event{Index: i + 1, Total: 4, Case: c})
	}
	for l := range lines {
		if strings.Contains(l, "case 3 of 4") {
			if !strings.Contains(l, "left") || !strings.Contains(l, "noop") {
				t.Errorf("line %q: want the case and the time left", l)
			}
			break
		}
	}
	tk.Stop()
	tk.Stop() // twice is fine
}
