package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

// runFor runs lockbench run with args into a fresh dir and returns the
// dir and its results.
func runFor(t *testing.T, args ...string) (string, *results.File) {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, err := lockbench(t, append([]string{"run", "--out", dir, "--no-report"}, args...)...); err != nil {
		t.Fatalf("run %q: %v\n%s", args, err, stderr)
	}
	f, err := results.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, f
}

// exitOf is the exit status an error of lockbench's gives main.
func exitOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	return 1
}

// sum adds a count over the cases of f.
func sum(f *results.File, count func(*results.Case) int64) int64 {
	var n int64
	for i := range f.Cases {
		n += count(&f.Cases[i])
	}
	return n
}

// TestCheckGates holds lockbench check to its four outcomes, each on the
// histories of a real run: a clean run of a real lock beside the control
// (0), a paused holder that outlives its lease under guard none — expired
// holders, expected (0), a single Redis server restarted without its data
// under a held key — a lock bug (1), and the clean run's results.json
// tampered with — overlaps and a fenced verdict it does not have (2).
func TestCheckGates(t *testing.T) {
	composetest.StartsServersWithin(t, 5*time.Minute) // four lockbench runs on real servers
	t.Run("clean", func(t *testing.T) {
		dir, f := runFor(t, "--backend", "redis,noop", "--clients", "2", "--fencing", "--duration", "400ms")
		if sum(f, func(c *results.Case) int64 { return c.Overlaps }) == 0 {
			t.Fatal("the control counted no overlap: the run shows nothing")
		}
		stdout, _, err := lockbench(t, "check", dir)
		if exitOf(err) != 0 || strings.Contains(stdout, "UNTRUSTED") || strings.Contains(stdout, "BROKEN") {
			t.Fatalf("check of a clean run: exit %d (%v)\n%s", exitOf(err), err, stdout)
		}

		// The same run with its records edited: 5 overlaps on the real
		// lock and a false fenced verdict it never had.
		raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for _, c := range doc["cases"].([]any) {
			if c := c.(map[string]any); c["backend"] == "redis" && c["guard"] == "fence" {
				c["overlaps"], c["linearizable_fenced"] = 5, false
			}
		}
		if raw, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "results.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		// As a process, to see main turn the gate into the exit status.
		cmd := exec.Command(os.Args[0], "check", dir)
		cmd.Env = append(os.Environ(), "LOCKBENCH_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUntrusted {
			t.Fatalf("check of a tampered results.json: %v, want exit %d\n%s", err, exitUntrusted, out)
		}
		for _, want := range []string{"UNTRUSTED redis", "overlaps 5→0", "linearizable_fenced false→true"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("check of a tampered results.json does not say %q:\n%s", want, out)
			}
		}
	})
	t.Run("expected expired holders", func(t *testing.T) {
		dir, f := runFor(t, "--backend", "redis", "--fault", "client-pause?x=1.5", "--injections", "1", "--clients", "2",
			"--guard", "none")
		expired := sum(f, func(c *results.Case) int64 { return c.IncidentsExpiredHolder })
		if expired == 0 || sum(f, func(c *results.Case) int64 { return c.IncidentsLockBug }) > 0 {
			t.Fatalf("a holder paused 1.5 TTLs: %d expired-holder incidents, %d lock bugs; want some and none",
				expired, sum(f, func(c *results.Case) int64 { return c.IncidentsLockBug }))
		}
		stdout, _, err := lockbench(t, "check", dir)
		if exitOf(err) != 0 {
			t.Fatalf("check of expected expired holders: exit %d (%v)\n%s", exitOf(err), err, stdout)
		}
		// Its injections are events of the history: results.json that
		// calls an injection untested which the history records tested
		// (or the reverse) no longer checks.
		if !strings.Contains(stdout, "0 whose records cannot be trusted") {
			t.Fatalf("check of a clean fault run:\n%s", stdout)
		}
		tamper(t, dir, func(c map[string]any) {
			tg := c["targets"].([]any)[0].(map[string]any)
			tg["tested"] = !(tg["tested"] == true)
		})
		stdout, _, err = lockbench(t, "check", dir)
		if exitOf(err) != exitUntrusted || !strings.Contains(stdout, "injection 1: results.json says tested") {
			t.Fatalf("check of a tampered tested flag: exit %d (%v), want %d\n%s", exitOf(err), err, exitUntrusted, stdout)
		}
	})
	t.Run("lock bug", func(t *testing.T) {
		dir, f := runFor(t, "--backend", "redis", "--fault", "restart", "--injections", "2", "--clients", "3", "--durability", "fast")
		if sum(f, func(c *results.Case) int64 { return c.IncidentsLockBug }) == 0 {
			t.Fatalf("a single Redis server restarted empty under held keys counted no lock bug: %+v", f.Cases)
		}
		stdout, _, err := lockbench(t, "check", dir)
		if exitOf(err) != exitBroken || !strings.Contains(stdout, "BROKEN redis") || !strings.Contains(stdout, "lock-bug incidents") {
			t.Fatalf("check of a lock bug: exit %d (%v), want %d\n%s", exitOf(err), err, exitBroken, stdout)
		}
	})
}

// TestCheckTamperedPromise: the contract line is drawn with the promise
// the backend's descriptor declares, not the one its workers report: a
// real run of the redis backend checks clean, records the declaration,
// and fails check (exit 2) once one grant's promise in its history is
// made longer — the edit a worker would make to turn its lock bugs into
// expired holders.
func TestCheckTamperedPromise(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	dir, f := runFor(t, "--backend", "redis", "--clients", "2", "--duration", "400ms")
	var c *results.Case
	for i := range f.Cases {
		if f.Cases[i].Backend == "redis" {
			c = &f.Cases[i]
		}
	}
	if c == nil || c.Contract == nil || c.Contract.PromiseNS != c.TTLMillis*int64(time.Millisecond)*99/100-int64(2*time.Millisecond) || c.PromiseDepartures != 0 {
		t.Fatalf("case %+v: want redis's declared contract (its TTL less 1%% and 2 ms), no departure", c)
	}
	if stdout, _, err := lockbench(t, "check", dir); exitOf(err) != 0 {
		t.Fatalf("check of a clean run: exit %d (%v)\n%s", exitOf(err), err, stdout)
	}
	path := filepath.Join(dir, c.History)
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tampered := false
	for i := range ops {
		if ops[i].Promise > 0 && !tampered {
			ops[i].Promise *= 10
			tampered = true
		}
	}
	if !tampered {
		t.Fatal("no grant in the history carries a promise")
	}
	if err := history.WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := lockbench(t, "check", dir)
	if exitOf(err) != exitUntrusted || !strings.Contains(stdout, "report a promise other than the backend declares") {
		t.Fatalf("check of a tampered promise: exit %d (%v), want %d\n%s", exitOf(err), err, exitUntrusted, stdout)
	}
}

// tamper edits every case of the results.json in dir with edit.
func tamper(t *testing.T, dir string, edit func(c map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "results.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc["cases"].([]any) {
		edit(c.(map[string]any))
	}
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckUnknownIsNoVerdict: a verdict porcupine left unknown (it ran
// out of time) is not contradicted by a re-check that decides it, nor by
// one that runs out of time where the run decided: unknown is not
// "false", and no difference of the records. Known verdicts that differ
// still are.
func TestCheckUnknownIsNoVerdict(t *testing.T) {
	known := func(r results.Verdict) history.Verdict { return history.Verdict{Result: r} }
	for _, tc := range []struct {
		recorded, found results.Verdict
		differs         bool
	}{
		{results.Unknown, results.NotLinearizable, false},
		{results.Linearizable, results.Unknown, false},
		{results.Unknown, results.Unknown, false},
		{results.Linearizable, results.NotLinearizable, true},
	} {
		c := &results.Case{Linearizable: results.Linearizable, LinearizableFenced: tc.recorded}
		d := differences(c, history.Report{}, verdicts{mutex: known(results.Linearizable), fenced: known(tc.found)})
		if (len(d) > 0) != tc.differs {
			t.Errorf("recorded %s, re-checked %s: differences %q, want differing=%v", tc.recorded, tc.found, d, tc.differs)
		}
	}
}
