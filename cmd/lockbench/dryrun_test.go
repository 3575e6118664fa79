package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/suites"
)

// TestDryRunListsTheSuite: `lockbench run --dry-run` lists every case of
// the suite the table gives, in order, and every fault class a backend
// is left without, with why, and starts nothing (no --out needed).
func TestDryRunListsTheSuite(t *testing.T) {
	for _, tc := range []struct {
		args []string
		plan func() suites.Plan
	}{
		{[]string{"--suite", "default"}, func() suites.Plan { p, _ := suites.Default().Plan(); return p }},
		{[]string{"--suite", "quick", "--backend", "redlock,redsync"}, func() suites.Plan {
			p, _ := suites.Quick().Narrow([]string{"redlock", "redsync"}).Plan()
			return p
		}},
		{[]string{"--suite", "full", "--fault", "restart", "--durability", "durable"}, func() suites.Plan {
			p, _ := suites.Full().WithFaults([]string{"restart"}).WithProfiles([]string{"durable"}).Plan()
			return p
		}},
	} {
		name := strings.Join(tc.args, " ")
		stdout, _, err := lockbench(t, append([]string{"run", "--dry-run"}, tc.args...)...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan := tc.plan()
		if len(plan.Cases) == 0 {
			t.Fatalf("%s: the table gives no case", name)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if want := len(plan.Cases) + len(plan.Skipped) + 1; len(lines) != want {
			t.Fatalf("%s: %d lines, want %d", name, len(lines), want)
		}
		for i, c := range plan.Cases {
			if !strings.HasSuffix(lines[i], " "+c.String()) || !strings.HasPrefix(lines[i], fmt.Sprintf("[%d/%d]", i+1, len(plan.Cases))) {
				t.Errorf("%s: line %d is %q, want case %s", name, i+1, lines[i], c)
			}
		}
		for i, s := range plan.Skipped {
			if l := lines[len(plan.Cases)+i]; !strings.Contains(l, s.Backend+" under "+s.FaultClass+": "+s.Reason) {
				t.Errorf("%s: line %q, want %s under %s skipped", name, l, s.Backend, s.FaultClass)
			}
		}
	}
}
