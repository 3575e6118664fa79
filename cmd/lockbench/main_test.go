package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// lockbench runs the command line in-process with args and returns what
// it wrote to stdout and stderr, and its error.
func lockbench(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	root := rootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestRunWritesResults runs one case on noop and checks that results.json
// has, for it, every field the documentation promises, and that noop's
// overlaps were counted.
func TestRunWritesResults(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := lockbench(t, "run", "--backend", "noop", "--workload", "hot", "--fault", "none",
		"--clients", "4", "--duration", "300ms", "--out", dir, "--no-report")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, filepath.Join(dir, "results.json")) {
		t.Errorf("stdout does not say where results.json is:\n%s", stdout)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Seed  uint64           `json:"seed"`
		RunID string           `json:"run_id"`
		Cases []map[string]any `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Seed == 0 || file.RunID == "" {
		t.Errorf("results.json has seed %d, run id %q: want both", file.Seed, file.RunID)
	}
	if len(file.Cases) != 1 {
		t.Fatalf("%d cases, want 1", len(file.Cases))
	}
	c := file.Cases[0]
	for _, field := range []string{"backend", "workload", "fault", "fault_class", "fencing", "clients", "clients_as", "acquired", "throughput",
		"latency_us", "overlaps", "overlaps_lock_bug", "overlaps_expired_holder", "incidents", "stale_accepted", "stale_rejected",
		"lost_updates", "errors", "linearizable", "linearizable_fenced", "history", "injections", "incident_rate_upper95"} {
		if _, ok := c[field]; !ok {
			t.Errorf("case has no %q field", field)
		}
	}
	lat, _ := c["latency_us"].(map[string]any)
	for _, p := range []string{"p50", "p99", "p999", "max"} {
		if _, ok := lat[p]; !ok {
			t.Errorf("latency_us has no %q", p)
		}
	}
	if c["backend"] != "noop" || c["workload"] != "hot" || c["fault"] != "none" || c["fencing"] != false || c["clients"] != 4.0 {
		t.Errorf("case identity: %v %v %v fencing=%v clients=%v", c["backend"], c["workload"], c["fault"], c["fencing"], c["clients"])
	}
	if acquired, _ := c["acquired"].(float64); acquired <= 0 {
		t.Errorf("acquired %v, want grants", c["acquired"])
	}
	if overlaps, _ := c["overlaps"].(float64); overlaps <= 0 || c["linearizable"] != false || c["clients_as"] != "goroutines" {
		t.Errorf("noop with 4 goroutine clients on one key: %v overlaps, linearizable %v, clients as %v: want overlaps, false, goroutines",
			c["overlaps"], c["linearizable"], c["clients_as"])
	}
	// lockbench check re-checks the history: noop's is not linearizable,
	// which is what the control is for: no gate fails.
	stdout, _, err = lockbench(t, "check", dir)
	if err != nil || !strings.Contains(stdout, "linearizable: false") {
		t.Errorf("check of noop's run: %v\n%s", err, stdout)
	}
}

// TestRunReportCompare runs a fenced case on a real Redis server, which
// run starts and stops, renders the report, re-renders it with report DIR
// and compares the run with itself.
func TestRunReportCompare(t *testing.T) {
	composetest.StartsServersWithin(t, 5*time.Minute) // 91 s on a 2-core machine loaded about 10×
	dir := t.TempDir()
	if _, stderr, err := lockbench(t, "run", "--backend", "redis", "--fencing", "--clients", "2",
		"--duration", "300ms", "--out", dir); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	for _, f := range []string{"results.json", "results.csv", "report.md", "index.html"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s after run: %v", f, err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "report.md")); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := lockbench(t, "report", dir)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		t.Errorf("report DIR did not render report.md again: %v", err)
	}
	if !strings.Contains(stdout, "redis") {
		t.Errorf("report's summary does not name the backend:\n%s", stdout)
	}

	cmp := filepath.Join(t.TempDir(), "cmp")
	if _, _, err := lockbench(t, "report", "--compare", dir, dir, "--out", cmp); err != nil {
		t.Fatalf("report --compare: %v", err)
	}
	entries, err := os.ReadDir(cmp)
	if err != nil || len(entries) == 0 {
		t.Fatalf("comparison dir: %v entries, %v", len(entries), err)
	}
}

// TestBadInput checks that bad flags fail before anything runs, with an
// error naming the value.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		invalid bool   // the error wraps bench.ErrConfig (and judge.ErrConfig for a guard)
		want    string // the error names this
	}{
		{[]string{"run", "--backend", "nosuch"}, false, `"nosuch"`},
		{[]string{"run", "--backend", "noop", "--clients", "0"}, true, "clients 0"},
		{[]string{"run", "--backend", "noop", "--duration", "0s"}, true, "--duration 0s"},
		{[]string{"run", "--backend", "noop", "--ttl", "-1s"}, true, "--ttl -1s"},
		{[]string{"run", "--backend", "noop", "--trials", "0"}, true, "--trials 0"},
		{[]string{"run", "--backend", "noop", "--workload", "nope"}, true, `"nope"`},
		{[]string{"run", "--backend", "noop", "--workload", "uniform", "--keys", "0"}, true, "keys 0"},
		{[]string{"run", "--backend", "noop", "--fault", "nope"}, true, `"nope"`},
		{[]string{"run", "--backend", "noop", "--fault", "client-pause?x=-2"}, true, `x="-2"`},
		{[]string{"run", "--backend", "noop", "--fault", "client-pause", "--clients-as", "goroutines"}, false, "processes"},
		{[]string{"run", "--backend", "noop", "--clients-as", "threads"}, false, `"threads"`},
		{[]string{"run", "--backend", "noop", "--durability", "eventually"}, false, `"eventually"`},
		{[]string{"run", "--backend", "noop", "--guard", "nope"}, true, `"nope"`},
		{[]string{"run", "--backend", "noop", "--hold", "bogus"}, true, `"bogus"`},
		{[]string{"run", "--backend", "noop", "--hold-left", "2"}, true, "hold left 2"},
		{[]string{"run", "--backend", "noop", "--hold-left", "-3s"}, true, `--hold-left "-3s"`},
		{[]string{"run", "--backend", "noop", "--hold-left", "soon"}, true, `--hold-left "soon"`},
		{[]string{"run", "--backend", "noop", "--acquire-timeout", "0s"}, true, "--acquire-timeout 0s"},
		{[]string{"run", "--suite", "quick", "--auto-extend"}, true, "--auto-extend"},
		{[]string{"run", "--backend", "noop", "--fault", "client-pause?at=nowhere"}, true, `at="nowhere"`},
		{[]string{"run", "--backend", "noop", "--fault", "client-pause?at=extend"}, true, "--auto-extend"},
		{[]string{"run", "--backend", "noop", "--fault", "client-pause?at=extend", "--auto-extend"}, true, "several TTLs"},
		{[]string{"run", "--suite", "nope"}, false, `"nope"`},
		{[]string{"run", "--backend", "noop"}, false, `"out"`},
		{[]string{"report"}, false, "dir"},
		{[]string{"report", "--compare", "a"}, false, "BASE HEAD"},
	} {
		name := strings.Join(tc.args, " ")
		out := filepath.Join(t.TempDir(), "out")
		args := tc.args
		if tc.args[0] == "run" && tc.want != `"out"` {
			args = append(args, "--out", out)
		}
		_, _, err := lockbench(t, args...)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not name %s", name, err, tc.want)
		}
		if tc.invalid && (!errors.Is(err, bench.ErrConfig) || (strings.Contains(name, "--guard") && !errors.Is(err, judge.ErrConfig))) {
			t.Errorf("%s: error %q does not wrap bench.ErrConfig (and judge.ErrConfig for a guard)", name, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the output dir was created (%v): the run started", name, err)
		}
	}
}

// TestBadBackendParams runs a backend whose params it does not know: the
// case cannot run, and run says so with an error, after writing what it
// has.
func TestBadBackendParams(t *testing.T) {
	composetest.StartsServers(t) // the run starts its Redis server before it opens the backend
	dir := t.TempDir()
	_, _, err := lockbench(t, "run", "--backend", "redis?bogus=1", "--duration", "200ms", "--out", dir, "--no-report")
	if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("run with an unknown param: %v, want an invalid-argument error naming it", err)
	}
}

// TestBackendsCommand starts every backend's servers (backends --probe)
// and checks the table of what each guarantees: one row per registered backend, with its
// nodes, quorum and fencing as its Info says.
func TestBackendsCommand(t *testing.T) {
	composetest.StartsServersWithin(t, 5*time.Minute) // 84 s on a 2-core machine loaded about 10×
	stdout, _, err := lockbench(t, "backends", "--probe")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		fields := strings.Fields(line)
		rows[fields[0]] = fields
	}
	for _, name := range backends.Names() {
		if len(rows[name]) < 5 {
			t.Errorf("no row for %s in:\n%s", name, stdout)
		}
	}
	for name, want := range map[string][]string{
		"redlock": {"5", "3", "true"},
		"redsync": {"5", "3", "false"},
		"noop":    {"0", "0", "false"},
	} {
		if got := rows[name]; len(got) < 4 || strings.Join(got[1:4], " ") != strings.Join(want, " ") {
			t.Errorf("%s: nodes, quorum, fencing = %v, want %v", name, got, want)
		}
	}
}

// TestMain lets the test binary be lockbench itself: for TestInterrupt,
// and for the worker processes a run starts (lockbench worker runs the
// program's own binary, here this test binary: the variable, set for
// the tests, reaches them).
func TestMain(m *testing.M) {
	if os.Getenv("LOCKBENCH_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Setenv("LOCKBENCH_TEST_MAIN", "1")
	os.Exit(m.Run())
}

// TestInterrupt sends SIGINT to a lockbench run on a real Redis server
// once the first case is done: lockbench must stop, keep the measured case
// in results.json marked partial, and leave no server running.
func TestInterrupt(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 26 s on a 2-core machine loaded about 10×
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "run", "--backend", "redis", "--clients", "2", "--duration", "1s",
		"--trials", "20", "--out", dir, "--no-report")
	cmd.Env = append(os.Environ(), "LOCKBENCH_TEST_MAIN=1")
	stderr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // progress lines go to stderr: read both
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), "[1/20]") {
			break
		}
	}
	// The detector must see the running server, or its "none left" below
	// would prove nothing.
	if pids := serversUnder(t, dir); len(pids) == 0 {
		t.Fatalf("no server found running under %s during the run", dir)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		seen = append(seen, sc.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lockbench after SIGINT: %v\n%s", err, strings.Join(seen, "\n"))
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("lockbench still running a minute after SIGINT\n%s", strings.Join(seen, "\n"))
	}

	f, err := results.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Partial || len(f.Cases) == 0 || len(f.Cases) == 20 {
		t.Fatalf("results.json after SIGINT: %d of 20 cases, partial %v; want the measured ones, partial", len(f.Cases), f.Partial)
	}
	if pids := serversUnder(t, dir); len(pids) > 0 {
		t.Fatalf("servers still running after SIGINT: pids %v", pids)
	}
}

// serversUnder returns the pids of processes that run in a directory
// under dir (compose starts each server in its node's directory; Redis
// rewrites its command line, so that does not tell).
func serversUnder(t *testing.T, dir string) []int {
	t.Helper()
	cwds, err := filepath.Glob("/proc/[0-9]*/cwd")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range cwds {
		cwd, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}
