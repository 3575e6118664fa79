package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/workloads"
)

// The exit codes of lockbench check.
const (
	// exitBroken: the records hold, and a real lock broke — a lock bug,
	// or a false fenced verdict where tokens were checked.
	exitBroken = 1
	// exitUntrusted: the records cannot be trusted — results.json differs
	// from the re-check, a verdict is unknown, a history is missing, or
	// the control showed no violation (the checker is blind).
	exitUntrusted = 2
)

func checkCmd() *cobra.Command {
	var timeout time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use: "check DIR",
		Short: "Re-check every history of a saved run: exit 0 if it holds and no real lock broke, 1 if one broke, 2 if the records cannot be " +
			"trusted",
		Long: `check reads DIR/results.json and, for every case, its history (DIR/history/*.jsonl.gz): it
counts the overlaps again, each judged against the lock's contract (lock bug, ambiguous, expired
holder), the incidents, contended grants, validity departures, stale writes, lost updates and
token regressions under the case's guard, and runs porcupine on the history with a mutex model
and a fenced-mutex model. It prints a line per case with what it found and its verdict, or with
--json one JSON document: every case's counts, verdicts and findings, the totals and the exit
status.

Exit status:
  0  every history re-checks to what results.json says, and no real backend has a lock bug;
  1  a real backend has a lock bug, or a false fenced verdict where tokens were checked;
  2  results.json differs from the re-check, a verdict is unknown (porcupine ran out of time, or
     some grants of a fencing backend carried no token), a history is missing, DIR or its
     results.json cannot be read, or a control case (noop, with at least 2 clients) shows no
     violation: the checker is blind; or a history's grants report a promise other than the
     backend's descriptor declares (the contract line is drawn with the declaration, never with
     the workers' report), or the declared drift is above a fifth of the TTL; or results.json's
     injections (tested flags, reasons, targets) differ from the history's inject events.
Exit 2 outranks exit 1: a lock bug in records that do not hold is reported, but the records come
first. Expired holders and ambiguous overlaps are not failures (a paused holder under guard none
is what the run means to show), and neither is a false mutex verdict, which every overlap makes.`,
		Example: `  lockbench check results/latest
  lockbench check --json results/latest > check.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, f, err := readRun(args[0])
			if err != nil {
				// Records that cannot be read cannot be trusted: not exit 1,
				// which says a lock broke.
				err = &exitError{code: exitUntrusted, err: err}
				if asJSON {
					_ = writeJSON(cmd.OutOrStdout(), checked{Dir: args[0], Exit: exitUntrusted, Error: err.Error()})
				}
				return err
			}
			r, err := check(dir, f, timeout)
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else {
				r.text(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			return r.gate()
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", judge.DefaultCheckTimeout, "bound on each linearizability check")
	cmd.Flags().BoolVar(&asJSON, "json", false, "write the re-check as one JSON document instead of lines")
	return cmd
}

// verdicts are a history's linearizability verdicts.
type verdicts struct{ mutex, fenced history.Verdict }

// findings is what the re-check of one case turned up against the gates.
type findings struct {
	broken, untrusted []string
}

// checked is the re-check of a run: what lockbench check --json writes.
type checked struct {
	Dir       string        `json:"dir"`
	Cases     []checkedCase `json:"cases"`
	Histories int           `json:"histories"`
	Broken    int           `json:"broken"`
	Untrusted int           `json:"untrusted"`
	// Exit is the status lockbench check exits with: 0, 1 (a lock broke)
	// or 2 (the records cannot be trusted).
	Exit  int    `json:"exit"`
	Error string `json:"error,omitempty"`
}

// checkedCase is the re-check of one case.
type checkedCase struct {
	Name   string          `json:"name"`
	Report *history.Report `json:"report,omitempty"`
	// Linearizable and LinearizableFenced are porcupine's verdicts, with
	// the reason when there is one.
	Linearizable       string   `json:"linearizable,omitempty"`
	LinearizableFenced string   `json:"linearizable_fenced,omitempty"`
	Broken             []string `json:"broken,omitempty"`
	Untrusted          []string `json:"untrusted,omitempty"`
}

// writeJSON writes v to w as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// check re-checks the histories of f. The error is one that stops the
// re-check (a history that cannot be read), an exitError for exit 2.
func check(dir string, f *results.File, timeout time.Duration) (*checked, error) {
	out := &checked{Dir: dir, Cases: []checkedCase{}}
	verdictsOf := map[string]verdicts{}
	histories := map[string][]history.Op{}
	for _, c := range f.Cases {
		name := fmt.Sprintf("%s %s/%s guard=%s clients=%d trial=%d", c.Backend, c.Workload, c.Fault, c.Guard, c.Clients, c.Trial)
		if c.Durability != "" {
			name += " " + c.Durability
		}
		cc := checkedCase{Name: name}
		var fd findings
		if c.History == "" {
			fd.untrusted = append(fd.untrusted, "no history recorded, nothing to re-check")
		} else {
			ops, ok := histories[c.History]
			if !ok {
				var err error
				if ops, err = history.ReadFile(filepath.Join(dir, c.History)); err != nil {
					err = &exitError{code: exitUntrusted, err: fmt.Errorf("%s: %w", name, err)}
					out.Exit, out.Error = exitUntrusted, err.Error()
					return out, err
				}
				histories[c.History] = ops
				verdictsOf[c.History] = verdicts{history.Linearizable(ops, timeout), history.LinearizableFenced(ops, timeout)}
			}
			v := verdictsOf[c.History]
			judged, dep := underContract(&c, ops)
			r := history.Check(judged, c.Guard, judge.Guard(c.Guard).Fenced())
			cc.Report, cc.Linearizable, cc.LinearizableFenced = &r, verdictText(v.mutex), verdictText(v.fenced)
			fd = gates(&c, r, v)
			fd.untrusted = append(fd.untrusted, contractFindings(&c, dep)...)
			fd.untrusted = append(fd.untrusted, injectionFindings(&c, ops, r.Pauses)...)
		}
		switch {
		case len(fd.untrusted) > 0:
			out.Untrusted++
		case len(fd.broken) > 0:
			out.Broken++
		}
		cc.Broken, cc.Untrusted = fd.broken, fd.untrusted
		out.Cases = append(out.Cases, cc)
	}
	out.Histories = len(histories)
	switch {
	case out.Untrusted > 0:
		out.Exit = exitUntrusted
	case out.Broken > 0:
		out.Exit = exitBroken
	}
	return out, nil
}

// text writes the re-check as lines: one per case with what it found,
// then its findings, then the totals.
func (c *checked) text(w io.Writer) {
	for _, cc := range c.Cases {
		if r := cc.Report; r != nil {
			fmt.Fprintf(w, "%s: %d sections (%d contended), %d overlaps (%d lock bug, %d ambiguous, %d expired holder) in %d incidents (%d lock "+
				"bug, %d ambiguous, %d expired holder), stale writes %d accepted %d rejected (%d after the lease told its holder, %d silent), %d "+
				"lost updates, %d token regressions, leases outside their contract %d short %d long; ambiguous width up to %v (%d wider "+
				"than two round trips of %v, counted as lock bugs); linearizable: %s; fenced: %s\n",
				cc.Name, r.Sections, r.ContendedGrants, r.Overlaps, r.OverlapsLockBug, r.OverlapsAmbiguous, r.OverlapsExpiredHolder,
				r.Incidents, r.IncidentsLockBug, r.IncidentsAmbiguous, r.IncidentsExpiredHolder,
				r.StaleAccepted, r.StaleRejected, r.StaleTold, r.StaleSilent,
				r.LostUpdates, r.TokenRegressions, r.ValidityShort, r.ValidityLong, time.Duration(r.AmbiguousWidthMax).Round(time.Microsecond),
				r.OverlapsAmbiguousWide, time.Duration(r.RoundTrip).Round(time.Microsecond), cc.Linearizable, cc.LinearizableFenced)
		}
		for _, s := range cc.Untrusted {
			fmt.Fprintf(w, "  UNTRUSTED %s: %s\n", cc.Name, s)
		}
		for _, s := range cc.Broken {
			fmt.Fprintf(w, "  BROKEN %s: %s\n", cc.Name, s)
		}
	}
	fmt.Fprintf(w, "%d cases, %d histories: %d with a lock broken, %d whose records cannot be trusted\n",
		len(c.Cases), c.Histories, c.Broken, c.Untrusted)
}

// gate returns the exitError of the re-check's status, or nil for 0.
func (c *checked) gate() error {
	switch c.Exit {
	case exitUntrusted:
		err := fmt.Errorf("%d of %d cases cannot be trusted (see UNTRUSTED above)", c.Untrusted, len(c.Cases))
		return &exitError{code: exitUntrusted, err: err}
	case exitBroken:
		return &exitError{code: exitBroken, err: fmt.Errorf("%d of %d cases show a real lock broken (see BROKEN above)", c.Broken, len(c.Cases))}
	}
	return nil
}

// gates judges one case's re-check against its record.
func gates(c *results.Case, r history.Report, v verdicts) findings {
	var fd findings
	if d := differences(c, r, v); len(d) > 0 {
		fd.untrusted = append(fd.untrusted, "results.json differs from the re-check: "+strings.Join(d, ", "))
	}
	if v.mutex.Result != results.Linearizable && v.mutex.Result != results.NotLinearizable {
		fd.untrusted = append(fd.untrusted, "mutex verdict "+verdictText(v.mutex))
	}
	if c.Fencing && !v.fenced.Result.Known() {
		fd.untrusted = append(fd.untrusted, "tokens were checked, but the fenced verdict is "+verdictText(v.fenced))
	}
	if c.Control {
		if c.Clients >= 2 && r.Overlaps == 0 && v.mutex.Result != results.NotLinearizable {
			fd.untrusted = append(fd.untrusted, "the control excludes nobody, yet no violation was seen: the checker is blind here")
		}
		return fd
	}
	if r.IncidentsLockBug > 0 {
		ex := ""
		for _, e := range r.Examples {
			if strings.Contains(e, "(lock bug)") {
				ex = "; the first: " + e
				break
			}
		}
		fd.broken = append(fd.broken, fmt.Sprintf("%d lock-bug incidents (%d overlaps): the key was granted before the earlier grant's "+
			"contract line%s",
			r.IncidentsLockBug, r.OverlapsLockBug, ex))
	}
	if c.Fencing && v.fenced.Result == results.NotLinearizable {
		fd.broken = append(fd.broken, "tokens were checked and the fenced verdict is "+verdictText(v.fenced))
	}
	return fd
}

// differences names every count and verdict of c that the re-check does
// not reproduce, as "name recorded→found".
func differences(c *results.Case, r history.Report, v verdicts) []string {
	var out []string
	for _, x := range []struct {
		name            string
		recorded, found int64
	}{
		{"overlaps", c.Overlaps, r.Overlaps},
		{"overlaps_lock_bug", c.OverlapsLockBug, r.OverlapsLockBug},
		{"overlaps_ambiguous", c.OverlapsAmbiguous, r.OverlapsAmbiguous},
		{"overlaps_ambiguous_wide", c.OverlapsAmbiguousWide, r.OverlapsAmbiguousWide},
		{"overlaps_expired_holder", c.OverlapsExpiredHolder, r.OverlapsExpiredHolder},
		{"incidents", c.Incidents, r.Incidents},
		{"incidents_lock_bug", c.IncidentsLockBug, r.IncidentsLockBug},
		{"incidents_ambiguous", c.IncidentsAmbiguous, r.IncidentsAmbiguous},
		{"incidents_expired_holder", c.IncidentsExpiredHolder, r.IncidentsExpiredHolder},
		{"stale_accepted", c.StaleAccepted, r.StaleAccepted},
		{"stale_rejected", c.StaleRejected, r.StaleRejected},
		{"lost_updates", c.LostUpdates, r.LostUpdates},
		{"token_regressions", c.TokenRegressions, r.TokenRegressions},
		{"contended_grants", c.ContendedGrants, r.ContendedGrants},
		{"validity_short", c.ValidityShort, r.ValidityShort},
		{"validity_long", c.ValidityLong, r.ValidityLong},
		{"lease_ends", c.LeaseEnds, r.LeaseEnds},
		{"stale_told", c.StaleTold, r.StaleTold},
		{"stale_silent", c.StaleSilent, r.StaleSilent},
		{"extends", c.Extends, r.Extends},
		{"extends_failed", c.ExtendsFailed, r.ExtendsFailed},
	} {
		if x.recorded != x.found {
			out = append(out, fmt.Sprintf("%s %d→%d", x.name, x.recorded, x.found))
		}
	}
	for _, x := range []struct {
		name     string
		recorded results.Verdict
		found    history.Verdict
	}{{"linearizable", c.Linearizable, v.mutex}, {"linearizable_fenced", c.LinearizableFenced, v.fenced}} {
		// An unknown verdict (porcupine ran out of time) is no verdict:
		// a re-check that decides it, or runs out of time where the run
		// decided, contradicts nothing. A verdict the re-check leaves
		// unknown is gated on its own (gates), where it matters.
		if x.recorded != x.found.Result && x.recorded.Known() && x.found.Result.Known() {
			out = append(out, fmt.Sprintf("%s %s→%s", x.name, x.recorded, x.found.Result))
		}
	}
	return out
}

func verdictText(v history.Verdict) string {
	if v.Reason == "" {
		return string(v.Result)
	}
	return fmt.Sprintf("%s (%s)", v.Result, v.Reason)
}

// MaxDriftRate bounds the drift a lock may declare off its TTL: the
// allowance exists for clock rates (Redlock's 1%) and the slack a lock
// knows of (etcd's pooled lease, renewed up to a tenth of its TTL before
// the call: 11%); a lock that takes more than a fifth of its TTL off its
// promise moves its own contract line so far that a lock bug hides
// behind it, and that is a finding, not a contract.
const MaxDriftRate = 0.2

// underContract returns ops as the checkers judge them: with the contract the
// backend declares (results.json's contract, from its descriptor) in
// place of the promise each worker reported, and the ops whose report
// differed. Without a declaration, ops as they are.
func underContract(c *results.Case, ops []history.Op) ([]history.Op, history.Departures) {
	if c.Contract == nil {
		return ops, history.Departures{}
	}
	return history.Contract{Promise: c.Contract.PromiseNS, MaxValidity: c.Contract.MaxValidityNS}.Impose(ops)
}

// contractFindings are what makes a case's contract untrustworthy: a
// history whose promises differ from the declaration (or from the count
// results.json gives), or a declared drift above MaxDriftRate.
func contractFindings(c *results.Case, dep history.Departures) []string {
	if c.Contract == nil {
		return nil
	}
	var out []string
	if dep.N > 0 {
		out = append(out, fmt.Sprintf("%d grants or extensions in the history report a promise other than the backend declares "+
			"(judged by the declaration): %s", dep.N, strings.Join(dep.Examples, "; ")))
	}
	if dep.N != c.PromiseDepartures {
		out = append(out, fmt.Sprintf("results.json differs from the re-check: promise_departures %d→%d", c.PromiseDepartures, dep.N))
	}
	if c.Contract.DriftRate > MaxDriftRate {
		out = append(out, fmt.Sprintf("the backend declares a drift of %g of its TTL, above the bound of %g: "+
			"its contract line promises too little to judge by", c.Contract.DriftRate, MaxDriftRate))
	}
	return out
}

// injectionFindings compares the injections results.json records for c
// with those its history records (inject ops, the pauses' landings read
// from the same history): a case whose tested flags the files alone do
// not reproduce cannot be trusted.
func injectionFindings(c *results.Case, ops []history.Op, pauses []history.Landing) []string {
	var recorded []results.Target
	for _, o := range ops {
		if o.F == history.Inject && o.Injection != nil {
			recorded = append(recorded, *o.Injection)
		}
	}
	if len(recorded) == 0 && len(c.Targets) == 0 {
		return nil
	}
	if len(recorded) != len(c.Targets) {
		return []string{fmt.Sprintf("results.json records %d injections, the history %d", len(c.Targets), len(recorded))}
	}
	var out []string
	for i, t := range workloads.Landed(recorded, pauses) {
		r := c.Targets[i]
		switch {
		case testedText(t.Tested) != testedText(r.Tested) || t.WhyNot != r.WhyNot:
			out = append(out, fmt.Sprintf("injection %d: results.json says tested %s (%q), the history %s (%q)",
				r.Injection, testedText(r.Tested), r.WhyNot, testedText(t.Tested), t.WhyNot))
		case strings.Join(t.Nodes, ",") != strings.Join(r.Nodes, ","):
			out = append(out, fmt.Sprintf("injection %d: results.json says it hit %v, the history %v", r.Injection, r.Nodes, t.Nodes))
		}
	}
	return out
}

// testedText is an injection's tested flag in words.
func testedText(b *bool) string {
	switch {
	case b == nil:
		return "unjudged"
	case *b:
		return "yes"
	}
	return "no"
}
