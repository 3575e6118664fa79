package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// runNoop runs n beside 2 goroutine clients of the noop control for d,
// composed as the runner composes a case, and returns the judge's result
// and n's record.
func runNoop(t *testing.T, n *Nemesis, d time.Duration) (*judge.Result, Record) {
	t.Helper()
	hold, _ := workloads.Constant(time.Millisecond)
	spec, err := workloads.Spec{Workload: workloads.Hot, Clients: 2, Hold: hold, Duration: d}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	return runCase(t, n, spec)
}

// TestNemesisRecordsItsInjections: a schedule runs from the judge's start
// barrier; each injection is numbered, with its window from the case
// start; a window still open when the nemesis stops is closed then, and a
// failure to inject is recorded with its time.
func TestNemesisRecordsItsInjections(t *testing.T) {
	defer goleak.VerifyNone(t)
	var seen time.Time
	n := newNemesis()
	n.plan = plan{schedule: func(ctx context.Context, n *Nemesis) {
		seen, _ = n.started()
		n.inject("until the end", results.Target{Nodes: []string{"a"}}) // never closed here: Stop closes it
		if n.at(ctx, 100*time.Millisecond) {
			inj := n.inject("kill", results.Target{Nodes: []string{"b"}})
			n.fail(nil) // nothing to record
			n.fail(errors.New("node-3 would not die"))
			inj.end()
			inj.end() // a second call does nothing
		}
		<-ctx.Done()
	}}
	res, rec := runNoop(t, n, 400*time.Millisecond)
	if !seen.Equal(res.Start) {
		t.Fatalf("the schedule saw the start %v, the judge %v", seen, res.Start)
	}
	if len(rec.Targets) != 2 || rec.Targets[0].Injection != 1 || rec.Targets[1].Injection != 2 || rec.Targets[1].Nodes[0] != "b" {
		t.Fatalf("targets %+v: want injections 1 and 2, in order", rec.Targets)
	}
	labels := map[string]results.Window{}
	for _, w := range rec.Windows {
		labels[w.Label] = w
		if w.EndS < w.StartS {
			t.Fatalf("window %+v ends before it starts", w)
		}
	}
	if len(rec.Windows) != 2 || rec.Windows[0].Label != "until the end" {
		t.Fatalf("windows %+v: want the open one, then the kill", rec.Windows)
	}
	if w := labels["kill"]; w.StartS < 0.1 {
		t.Fatalf("kill window %+v: want one starting at 100ms", w)
	}
	if w := labels["until the end"]; w.StartS > 0.05 || w.EndS < 0.4 {
		t.Fatalf("open window %+v not closed when the nemesis stopped", w)
	}
	if len(rec.Failures) != 1 || !strings.HasSuffix(rec.Failures[0], "s: node-3 would not die") {
		t.Fatalf("failures %q: want the one failure, timed", rec.Failures)
	}
	var at float64
	if _, err := fmt.Sscanf(rec.Failures[0], "at %fs:", &at); err != nil || at < 0.1 {
		t.Fatalf("failure %q: want the time it was recorded, at 100ms or later (%v)", rec.Failures[0], err)
	}
}

// TestNemesisThatNeverStartsRecordsNothing: clients that never reach the
// barrier (the case is stopped before) leave an empty record, and Stop
// returns at once.
func TestNemesisThatNeverStartsRecordsNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	j, err := judge.New(judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Open(t.Context(), "local", judge.CaseSpec{ID: "case", Guards: []judge.Guard{judge.GuardNone}, Processes: 1, Duration: time.Second, TimelineStep: time.Second}); err != nil {
		t.Fatal(err)
	}
	n := newNemesis()
	n.plan = plan{schedule: func(context.Context, *Nemesis) { t.Error("the schedule ran without a start") }}
	n.Attach(t.Context(), j.Case("case"), time.Second)
	if rec := n.Stop(); rec.Windows != nil || rec.Targets != nil || rec.Failures != nil {
		t.Fatalf("record %+v of a case that never started", rec)
	}
	if err := n.Pause(1, time.Millisecond); err == nil {
		t.Fatal("a pause before the start")
	}
}

// TestPauseStopsTheProcess: a client pause stops the process, resumes it
// after the pause, and is an injection of its own with its window; Stop
// waits for the resumption.
func TestPauseStopsTheProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	n := newNemesis()
	n.begin(time.Now())
	n.AddProcess(7, cmd.Process)
	if err := n.Pause(8, time.Second); err == nil {
		t.Fatal("paused a process the nemesis was not given")
	}
	const d = 300 * time.Millisecond
	// Pause returns once every thread has stopped (or with an error).
	if err := n.Pause(7, d); err != nil {
		t.Fatal(err)
	}
	rec := n.Stop()
	if state := procState(t, cmd.Process.Pid); state == "T" {
		t.Fatal("the process is still stopped after Stop")
	}
	if len(rec.Targets) != 1 || rec.Targets[0].Nodes[0] != "process 7" || len(rec.Windows) != 1 {
		t.Fatalf("record %+v: want the pause of process 7, with its window", rec)
	}
	if w := rec.Windows[0]; w.EndS-w.StartS < d.Seconds() || !strings.Contains(w.Label, "process 7 stopped for 300ms") {
		t.Fatalf("window %+v: want a 300ms pause of process 7", w)
	}
}

// procState is the state letter of process pid (/proc/pid/stat).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return after[:1]
}
