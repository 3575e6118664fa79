package bench_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// runMatrix runs m on fresh servers with client processes of this test
// binary, writing into a temporary run dir, and returns the file and the
// dir.
func runMatrix(t *testing.T, m suites.Matrix) (*results.File, string) {
	t.Helper()
	cases, err := suites.Cross(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &bench.Runner{Clusters: bench.NewClusters(composetest.ForTest(t), nil), Dir: dir, Worker: testWorker(), Seed: 42,
		Progress: func(e bench.Event) {
			if e.Skipped != nil {
				t.Logf("skipped %s: %v", e.Case, e.Skipped)
			}
			for _, c := range e.Results {
				t.Logf("%s guard %s: %d grants (%.0f/s, p99 %dµs), %d overlaps (%d lock bug, %d expired holder) in %d incidents, stale %d accepted %d rejected, lost %d, linearizable %s/%s, errors %v",
					e.Case, c.Guard, c.Acquired, c.Throughput, c.LatencyUS.P99, c.Overlaps, c.OverlapsLockBug, c.OverlapsExpiredHolder, c.Incidents,
					c.StaleAccepted, c.StaleRejected, c.LostUpdates, c.Linearizable, c.LinearizableFenced, c.Errors)
				for _, n := range c.Notes {
					t.Logf("  note: %s", n)
				}
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := r.Run(ctx, cases)
	if err != nil {
		t.Fatal(err)
	}
	return f, dir
}

func find(f *results.File, backend, fault, guard string) *results.Case {
	for i, c := range f.Cases {
		if c.Backend == backend && c.Fault == fault && c.Guard == guard {
			return &f.Cases[i]
		}
	}
	return nil
}

// TestClientsAsProcesses: noop with 4 worker processes overlaps across
// processes and is not linearizable; redis and etcd with 4 worker
// processes on one hot key are, with no overlap. The history on disk is
// the one judged.
func TestClientsAsProcesses(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 27 s on a 2-core machine loaded about 10×
	f, dir := runMatrix(t, suites.Matrix{
		Backends: []string{"noop", "redis", "etcd"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"none"},
		Guards: []judge.Guard{judge.GuardNone, judge.GuardFence}, Clients: []int{4}, ClientsAs: results.ClientsProcesses,
		Spec: workloads.Spec{Duration: 1500 * time.Millisecond, TTL: 2 * time.Second},
	})
	if len(f.Cases) != 6 || f.Seed != 42 || f.RunID == "" {
		t.Fatalf("%d results (want 3 backends × 2 guards), seed %d, run id %q", len(f.Cases), f.Seed, f.RunID)
	}
	for _, c := range f.Cases {
		if c.ClientsAs != results.ClientsProcesses || c.History == "" || c.Acquired == 0 {
			t.Fatalf("%s: clients as %q, history %q, %d grants", c.Backend, c.ClientsAs, c.History, c.Acquired)
		}
		ops, err := history.ReadFile(filepath.Join(dir, c.History))
		if err != nil {
			t.Fatal(err)
		}
		procs := map[int]int64{}
		for _, o := range ops {
			if o.F == history.Acquire && o.Type == history.OK {
				procs[o.Process]++
			}
		}
		// Several processes granted (no lock promises each of 4
		// contenders a grant within 1.5 s: on a loaded machine an etcd
		// client was granted nothing while the other three were).
		if len(procs) < 2 || len(procs) > 4 {
			t.Fatalf("%s: grants by process %v: want grants from several of the 4 processes", c.Backend, procs)
		}
		switch c.Backend {
		case "noop":
			if c.Overlaps == 0 || c.Linearizable != results.NotLinearizable {
				t.Errorf("noop over 4 processes: %d overlaps, linearizable %s", c.Overlaps, c.Linearizable)
			}
		default:
			if c.Overlaps != 0 || c.StaleAccepted != 0 || c.Linearizable != results.Linearizable || c.LinearizableFenced != results.Linearizable {
				t.Errorf("%s over 4 processes: %d overlaps, %d stale, linearizable %s/%s (%s %s)", c.Backend, c.Overlaps, c.StaleAccepted,
					c.Linearizable, c.LinearizableFenced, c.LinearizableReason, c.LinearizableFencedReason)
			}
		}
	}
}

// TestClientPauseStopsTheProcess is Kleppmann's GC pause for real: the
// holder's worker process is stopped (SIGSTOP) for 3 × its 1 s lease
// after it read, and resumed. Its Redis lease expires meanwhile, another
// process is granted the key, and the stopped holder wakes and writes:
// the stores without a token check take the stale write, fence-rw rejects
// it. The overlaps are an expired holder's, never a lock bug.
func TestClientPauseStopsTheProcess(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute) // 51 s on a 2-core machine loaded about 10×
	f, _ := runMatrix(t, suites.Matrix{
		Backends: []string{"redis"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"client-pause?x=3"},
		Guards: []judge.Guard{judge.GuardNone, judge.GuardFenceRW}, Clients: []int{3}, Injections: 2,
		Spec: workloads.Spec{Duration: 12 * time.Second, TTL: time.Second},
	})
	none, rw := find(f, "redis", "client-pause?x=3", "none"), find(f, "redis", "client-pause?x=3", "fence-rw")
	if none == nil || rw == nil {
		t.Fatalf("results %+v", f.Cases)
	}
	if none.Injections != 2 || len(none.Targets) != 2 || len(none.FaultWindows) != 2 || none.Invalid {
		t.Fatalf("injections %d, targets %+v, windows %+v, invalid %v (%s)", none.Injections, none.Targets, none.FaultWindows, none.Invalid, none.InvalidReason)
	}
	for _, w := range none.FaultWindows {
		if d := w.EndS - w.StartS; d < 2.9 || d > 4 {
			t.Fatalf("pause window %+v: want 3s", w)
		}
	}
	if none.Overlaps == 0 || none.OverlapsLockBug != 0 || none.IncidentsExpiredHolder == 0 || none.StaleAccepted == 0 {
		t.Fatalf("guard none: %d overlaps (%d lock bug), %d expired-holder incidents, %d stale accepted: want expired-holder overlaps and stale writes",
			none.Overlaps, none.OverlapsLockBug, none.IncidentsExpiredHolder, none.StaleAccepted)
	}
	if rw.StaleAccepted != 0 || rw.StaleRejected == 0 {
		t.Fatalf("guard fence-rw: %d stale accepted, %d rejected: want none accepted", rw.StaleAccepted, rw.StaleRejected)
	}
	if none.Linearizable != results.NotLinearizable || none.LinearizableFenced != results.Linearizable {
		t.Fatalf("verdicts %s/%s: a paused holder breaks the mutex, not the tokens' order", none.Linearizable, none.LinearizableFenced)
	}
	if none.IncidentRateUpper95 <= 0 || none.IncidentRateUpper95 > 1 {
		t.Fatalf("incident rate bound %v", none.IncidentRateUpper95)
	}
}

// TestRunnerKeepsPartialResults interrupts a run: what was measured is
// written, marked partial, and what was not is recorded as cut.
func TestRunnerKeepsPartialResults(t *testing.T) {
	none, _ := nemesis.Parse("none")
	b, err := bench.ParseBackend("noop")
	if err != nil {
		t.Fatal(err)
	}
	spec := workloads.Spec{Workload: workloads.Hot, Clients: 2, Duration: 200 * time.Millisecond}
	c := bench.Case{Backend: b, Fault: none, Guards: []judge.Guard{judge.GuardNone}, ClientsAs: results.ClientsGoroutines, Spec: spec}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	r := &bench.Runner{Clusters: bench.NewClusters(composetest.ForTest(t), nil), Dir: dir, Worker: testWorker(), Progress: func(e bench.Event) {
		if e.Results != nil {
			cancel() // Ctrl-C after the first case
		}
	}}
	f, err := r.Run(ctx, []bench.Case{c, c})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	saved, rerr := results.Read(filepath.Join(dir, "results.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !saved.Partial || len(saved.Cases) != 1 || len(f.Cases) != 1 {
		t.Fatalf("saved %d cases, partial %v; want the 1 measured, partial", len(saved.Cases), saved.Partial)
	}
	// The case it stopped before is recorded as cut: planned, applicable,
	// not run (an answer must not read its absence as a pass).
	if len(saved.Skipped) != 1 || !saved.Skipped[0].Cut || saved.Skipped[0].Fault != "none" || saved.Skipped[0].Backend != "noop" {
		t.Fatalf("skipped %+v: want the second case, cut", saved.Skipped)
	}
}

func TestParseBackend(t *testing.T) {
	b, err := bench.ParseBackend("redlock?quarantine=false&fencing=true")
	if err != nil || b.Name != "redlock" || b.Params["quarantine"] != "false" || b.Params["fencing"] != "true" {
		t.Fatalf("ParseBackend = %+v, %v", b, err)
	}
	if _, err := bench.ParseBackend("zookeepr"); err == nil {
		t.Fatal("an unknown backend parsed")
	}
}

// TestRunnerNewBackends runs postgres in both modes and rueidislock end
// to end on the servers Clusters starts for them: without faults none of
// them violates anything, and under client-pause (their worker processes
// stopped) a resource that learns the lease mode's tokens from every
// request (fence-rw) rejects every stale write made once the paused
// holder's successor has touched it. (One
// made between the successor's grant and its first read, which a loaded
// machine widens, no resource can reject: it has not seen the token.)
func TestRunnerNewBackends(t *testing.T) {
	composetest.StartsServersWithin(t, 5*time.Minute) // 79 s on a 2-core machine loaded about 10×
	cases, err := suites.Cross(suites.Matrix{
		Backends:  []string{"postgres?mode=advisory", "postgres?mode=lease", "rueidislock"},
		Workloads: []workloads.Workload{workloads.Hot},
		Faults:    []string{"none", "client-pause"},
		Guards:    []judge.Guard{judge.GuardFenceRW},
		Clients:   []int{4},
		Spec:      workloads.Spec{Duration: 2 * time.Second, TTL: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &bench.Runner{Clusters: bench.NewClusters(composetest.ForTest(t), nil), Dir: dir, Worker: testWorker()}
	f, err := r.Run(context.Background(), cases)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != len(cases) {
		t.Fatalf("%d of %d cases measured", len(f.Cases), len(cases))
	}
	for _, c := range f.Cases {
		t.Logf("%s/%s: %d grants, %.0f/s, %d overlaps, %d stale writes accepted, %d rejected", c.Backend, c.Fault, c.Acquired, c.Throughput, c.Overlaps, c.StaleAccepted, c.StaleRejected)
		switch {
		case c.Acquired == 0:
			t.Errorf("%s/%s granted nothing", c.Backend, c.Fault)
		case c.Fault == "none" && c.Overlaps+c.StaleAccepted+c.LostUpdates != 0:
			t.Errorf("%s without faults: violations %+v", c.Backend, c)
		case c.Backend == "postgres?mode=lease" && c.StaleAccepted != 0:
			ops, err := history.ReadFile(filepath.Join(dir, c.History))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range staleAfterSuccessorRead(ops, string(c.Guard)) {
				t.Errorf("postgres lease mode under %s: section %d's write (op %d) accepted after its successor had read with its token",
					c.Fault, w.Section, w.Index)
			}
		}
	}
}

// staleAfterSuccessorRead returns the writes of guard's store, accepted,
// made by a holder after the next holder of its key had read: a store
// that learns tokens from reads rejects them if the lock's tokens order
// its holders.
func staleAfterSuccessorRead(ops []history.Op, guard string) []history.Op {
	var bad []history.Op
	next := map[int64]int64{} // section -> the next section granted its key
	last := map[string]int64{}
	read := map[int64]bool{} // sections that have read, so far in the judge's order
	for _, o := range ops {
		switch {
		case o.F == history.Acquire && o.Type == history.OK && o.Section > 0:
			if p, ok := last[o.Key]; ok {
				next[p] = o.Section
			}
			last[o.Key] = o.Section
		case o.F == history.Read && o.Guard == guard:
			read[o.Section] = true
		case o.F == history.Write && o.Guard == guard && o.Type == history.OK:
			if n, ok := next[o.Section]; ok && read[n] {
				bad = append(bad, o)
			}
		}
	}
	return bad
}

// TestRunnerFreshServersAcrossRounds: Fresh cases start new servers for
// each trial of a backend (the cases of one trial share them), their
// results say so (FreshServers), and cases without Fresh keep the
// servers they find; a second call of Run appends to the same file, with
// the same run id and case ids that continue the first call's.
func TestRunnerFreshServersAcrossRounds(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	m := suites.Matrix{
		Backends: []string{"redis", "noop"}, Workloads: []workloads.Workload{workloads.Hot, workloads.UniformKeys}, Faults: []string{"none"},
		Guards: []judge.Guard{judge.GuardNone}, Clients: []int{2}, Trials: 2,
		Spec: workloads.Spec{Duration: 300 * time.Millisecond, TTL: time.Second, Keys: 10},
	}
	cases, err := suites.Cross(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		cases[i].Fresh = true
	}
	env := composetest.ForTest(t)
	r := &bench.Runner{Clusters: bench.NewClusters(env, nil), Dir: t.TempDir(), Worker: testWorker(), Seed: 7}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f, err := r.Run(ctx, cases)
	if err != nil {
		t.Fatal(err)
	}
	redisNodes := func() int { return len(env.Nodes()) } // noop starts none
	if n := redisNodes(); n != 2 {
		t.Errorf("%d Redis servers started for 2 fresh trials (want 2: the cases of a trial share theirs)", n)
	}
	runID, first := f.RunID, len(f.Cases)
	for _, c := range f.Cases {
		if want := c.Backend == "redis"; c.FreshServers != want {
			t.Errorf("%s trial %d %s: fresh servers %v, want %v (noop has no servers)", c.Backend, c.Trial, c.Workload, c.FreshServers, want)
		}
	}
	// A second round: two more Redis cases without Fresh share one set.
	again, err := suites.Cross(suites.Matrix{Backends: []string{"redis"}, Workloads: m.Workloads, Faults: m.Faults, Guards: m.Guards,
		Clients: m.Clients, Spec: m.Spec})
	if err != nil {
		t.Fatal(err)
	}
	f, err = r.Run(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != first+2 || f.RunID != runID {
		t.Fatalf("second round: %d results (want %d), run id %q (want %q)", len(f.Cases), first+2, f.RunID, runID)
	}
	if n := redisNodes(); n != 2 {
		t.Errorf("%d Redis servers after a round without Fresh (want the 2 of before: it keeps the last)", n)
	}
	histories := map[string]bool{}
	for _, c := range f.Cases {
		if histories[c.History] {
			t.Errorf("history %s written twice: the second round's case ids repeat the first's", c.History)
		}
		histories[c.History] = true
	}
	for _, c := range f.Cases[first:] {
		if c.FreshServers {
			t.Errorf("%s %s in the second round: fresh servers set without Fresh", c.Backend, c.Workload)
		}
	}
}

// TestRunnerStartBy: a runner whose StartBy has passed starts no case;
// it records each one cut, with why, and returns without an error, so
// that a round given its share of a budget ends and the next can run.
func TestRunnerStartBy(t *testing.T) {
	cases, err := suites.Cross(suites.Matrix{
		Backends: []string{"noop"}, Workloads: []workloads.Workload{workloads.Hot}, Faults: []string{"none"},
		Guards: []judge.Guard{judge.GuardNone}, Clients: []int{2}, Trials: 2,
		Spec: workloads.Spec{Duration: 200 * time.Millisecond, TTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &bench.Runner{Clusters: bench.NewClusters(composetest.ForTest(t), nil), Worker: testWorker(), Seed: 3,
		StartBy: time.Now().Add(time.Hour)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := r.Run(ctx, cases[:1])
	if err != nil || len(f.Cases) != 1 {
		t.Fatalf("before StartBy: %d results, error %v (want 1, nil)", len(f.Cases), err)
	}
	r.StartBy = time.Now()
	f, err = r.Run(ctx, cases[1:])
	if err != nil || len(f.Cases) != 1 || f.Partial {
		t.Fatalf("after StartBy: %d results, partial %v, error %v (want the 1 of before, not partial, nil)", len(f.Cases), f.Partial, err)
	}
	i := slices.IndexFunc(f.Skipped, func(s results.Skip) bool { return s.Cut && s.Backend == "noop" && s.Fault == "none" })
	if i < 0 || !strings.Contains(f.Skipped[i].Reason, "share of the time ran out") {
		t.Errorf("the case not started is not recorded cut with why: %+v", f.Skipped)
	}
}

// TestStaleAfterSuccessorRead: the helper flags a write of a superseded
// holder only once its successor has read under the same guard.
func TestStaleAfterSuccessorRead(t *testing.T) {
	grant := func(s int64) history.Op {
		return history.Op{F: history.Acquire, Type: history.OK, Key: "k", Section: s}
	}
	read := func(s int64, g string) history.Op {
		return history.Op{F: history.Read, Type: history.OK, Key: "k", Section: s, Guard: g}
	}
	write := func(i int, s int64) history.Op {
		return history.Op{Index: i, F: history.Write, Type: history.OK, Key: "k", Section: s, Guard: "fence-rw"}
	}
	ops := []history.Op{grant(1), read(1, "fence-rw"), grant(2), write(3, 1), read(2, "fence"), write(5, 1), read(2, "fence-rw"),
		write(7, 1), write(8, 2)}
	got := staleAfterSuccessorRead(ops, "fence-rw")
	if len(got) != 1 || got[0].Index != 7 {
		t.Fatalf("flagged %+v, want the write at op 7 only", got)
	}
}
