package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
)

// The gates --fail-on can name.
const (
	gateLockBug    = "lock-bug"
	gateStaleWrite = "stale-write"
	gateUndecided  = "undecided"
)

// exitGate is the exit status of a run that a --fail-on gate failed.
const exitGate = 3

// parseGates checks the gates given to --fail-on, naming a bad one.
func parseGates(gates []string) ([]string, error) {
	known := []string{gateLockBug, gateStaleWrite, gateUndecided}
	var out []string
	for _, g := range gates {
		g = strings.TrimSpace(g)
		if !slices.Contains(known, g) {
			return nil, fmt.Errorf("%w: --fail-on %q: want some of %s", bench.ErrConfig, g, strings.Join(known, ", "))
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// failOn returns an exitError naming every gate of gates that f fails,
// or nil: lock-bug, a lock bug (a second grant before the contract line)
// in a case of a real backend (the control's are its job); stale-write,
// a stale write accepted by a resource that checked tokens (a guard
// other than none; staleGuard, when set, names the one the service uses,
// none included); undecided, when undecided says the answer is not
// decided ("" when it is).
func failOn(gates []string, f *results.File, staleGuard, undecided string) error {
	if len(gates) == 0 || f == nil {
		return nil
	}
	bugs, stale := map[string]int64{}, map[string]int64{}
	for _, c := range f.Cases {
		if c.Control {
			continue
		}
		where := c.Backend + " under " + c.Fault
		if c.IncidentsLockBug > 0 {
			bugs[where] = max(bugs[where], c.IncidentsLockBug)
		}
		if c.StaleAccepted > 0 && (c.Guard == staleGuard || (staleGuard == "" && c.Guard != string(judge.GuardNone))) {
			stale[where+" (guard "+c.Guard+")"] += c.StaleAccepted
		}
	}
	var failed []error
	if slices.Contains(gates, gateLockBug) && len(bugs) > 0 {
		failed = append(failed, fmt.Errorf("%s: %s", gateLockBug, counted(bugs, "lock-bug incident", "lock-bug incidents")))
	}
	if slices.Contains(gates, gateStaleWrite) && len(stale) > 0 {
		failed = append(failed, fmt.Errorf("%s: %s", gateStaleWrite, counted(stale, "stale write accepted", "stale writes accepted")))
	}
	if slices.Contains(gates, gateUndecided) && undecided != "" {
		failed = append(failed, fmt.Errorf("%s: %s", gateUndecided, undecided))
	}
	if len(failed) == 0 {
		return nil
	}
	return &exitError{code: exitGate, err: fmt.Errorf("--fail-on: %w", errors.Join(failed...))}
}

// counted writes m as "k (n things), ..." in k's order.
func counted(m map[string]int64, one, many string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		what := many
		if m[k] == 1 {
			what = one
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", k, m[k], what)
	}
	return strings.Join(parts, ", ")
}
