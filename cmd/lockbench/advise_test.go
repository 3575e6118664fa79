package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

// TestAdviseDryRun: the plan of the profile in seconds, with the
// candidates the team runs and those it would add, the classes and why,
// what each comparison needs, the estimate and what the budget cuts; no
// output dir, no server.
func TestAdviseDryRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	stdout, _, err := lockbench(t, "advise", "--have", "redis,postgres", "--intent", "correctness", "--hold", "200ms", "--ttl", "5s",
		"--clients", "8", "--budget", "8m", "--dry-run", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("dry run in %v:\n%s", took, stdout)
	for _, want := range []string{"on redis you run", "on postgres you run", "you would add etcd", "client-pause?x=0.3", "clock-rate",
		"qualification: 10 tested injections", "Round 1:", "estimated", "the budget is 8m0s, its last 20s kept for the answer", "round 1 starts no case after 5m45s", "Left out of round 1 for the budget"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--dry-run created the output dir (%v)", err)
	}
	if took > 30*time.Second {
		t.Errorf("the dry run took %v", took)
	}
}

// TestAdviseBadInput: every bad value of the profile, from flags or the
// file, is refused with an error naming it, before anything starts.
func TestAdviseBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("intent: speed\nclients: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("intent: efficiency\nclients: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--intent", "speed"}, []string{`intent "speed"`}},
		{[]string{"--have", "mysql"}, []string{`have "mysql"`}},
		{[]string{"--hold", "2s", "--ttl", "1s"}, []string{"hold p99 2s: not below the ttl 1s"}},
		{[]string{"--hold", "1ms,x"}, []string{`hold p99 "x"`}},
		{[]string{"--key-dist", "hot", "--keys", "3"}, []string{"keys 3"}},
		{[]string{"--token", "sometimes"}, []string{`token "sometimes"`}},
		{[]string{"--backend", "nosuch"}, []string{`"nosuch"`}},
		{[]string{"--budget", "-1m"}, []string{"--budget -1m0s"}},
		{[]string{"--fail-on", "lock-bugs"}, []string{`--fail-on "lock-bugs"`}},
		{[]string{"--profile", bad}, []string{bad, `intent "speed"`, "clients 0"}},
		{[]string{"--profile", filepath.Join(dir, "none.yaml")}, []string{"none.yaml"}},
		{[]string{"--profile", good, "--clients", "-3"}, []string{"clients -3"}},
		{nil, []string{"--out"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"advise"}, tc.args...)
		if tc.args != nil {
			args = append(args, "--out", out)
		}
		_, _, err := lockbench(t, args...)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %s", tc.args, err, w)
			}
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the output dir was created (%v): the run started", tc.args, err)
		}
	}
	// A profile from the file, a flag over it: the plan says both.
	stdout, _, err := lockbench(t, "advise", "--profile", good, "--ttl", "3s", "--dry-run")
	if err != nil || !strings.Contains(stdout, "Plan for intent efficiency") || !strings.Contains(stdout, "ttl 3s, 4 clients") {
		t.Errorf("profile and flag: %v\n%s", err, stdout)
	}
}

// TestFailOn: each gate fails on what it names, and only then, with an
// exit status of its own; the control's lock bugs are its job.
func TestFailOn(t *testing.T) {
	f := &results.File{Cases: []results.Case{
		{Backend: "noop", Fault: "none", Guard: "none", Control: true, IncidentsLockBug: 9, StaleAccepted: 9},
		{Backend: "redsync", Fault: "restart", Guard: "none", IncidentsLockBug: 2, StaleAccepted: 3},
		{Backend: "redsync", Fault: "restart", Guard: "fence", IncidentsLockBug: 2, StaleAccepted: 1},
		{Backend: "etcd", Fault: "restart", Guard: "fence"},
	}}
	for _, tc := range []struct {
		gates      []string
		stale      string
		undecided  string
		want, none []string
	}{
		{nil, "", "tied", nil, []string{"--fail-on"}},
		{[]string{"lock-bug"}, "", "", []string{"lock-bug: redsync under restart (2 lock-bug incidents)"}, []string{"noop"}},
		{[]string{"stale-write"}, "", "", []string{"stale-write: redsync under restart (guard fence) (1 stale write accepted)"}, []string{"guard none"}},
		{[]string{"stale-write"}, "none", "", []string{"(guard none) (3 stale writes accepted)"}, []string{"guard fence"}},
		{[]string{"undecided"}, "", "", nil, []string{"--fail-on"}},
		{[]string{"undecided", "lock-bug"}, "", "efficiency: redis, redlock tied", []string{"undecided: efficiency: redis, redlock tied", "lock-bug"}, nil},
	} {
		err := failOn(tc.gates, f, tc.stale, tc.undecided)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%v: %v, want no failure", tc.gates, err)
			}
			continue
		}
		e, ok := errors.AsType[*exitError](err)
		if !ok || e.code != exitGate {
			t.Errorf("%v: %v, want exit %d", tc.gates, err, exitGate)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", tc.gates, err, w)
			}
		}
		for _, n := range tc.none {
			if strings.Contains(err.Error(), n) {
				t.Errorf("%v: %q says %q", tc.gates, err, n)
			}
		}
	}
	if _, err := parseGates([]string{"lock-bug", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a bad gate: %v", err)
	}
}
