package advise

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write prints the plan for a person: the profile, the candidates, the
// classes in and out with why, what each comparison needs at the
// family's level, round 1's cases and time, and what the budget leaves
// undecided.
func (pl *Plan) Write(w io.Writer) error {
	p := pl.Profile
	var b strings.Builder
	extend := ""
	if p.AutoExtend {
		extend = " auto-extended"
	}
	fmt.Fprintf(&b, "Plan for intent %s: hold %v (p99 %v), ttl %v%s, %d clients, %s keys (%d), token %s, "+
		"pauses up to %v, clock steps up to %v, %v of unavailability acceptable.\n",
		p.Intent, p.HoldP50, p.HoldP99, p.TTL, extend, p.Clients, p.KeyDist, max(p.Keys, 1), p.Token, p.MaxPause, p.ClockStep, p.Unavailability)
	fmt.Fprintf(&b, "\nCandidates (you run: %s):\n", orNone(strings.Join(p.Have, ", ")))
	for _, c := range pl.Candidates {
		where := "you would add " + c.Kind
		if c.Have {
			where = "on " + c.Kind + " you run"
		}
		fmt.Fprintf(&b, "  %-36s %s\n", c.Spec, where)
	}
	fmt.Fprintln(&b, "\nFault classes:")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range pl.Classes {
		in := "out"
		if c.In {
			in = "in"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Spec, in, c.Why)
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nWhat each comparison needs, at the family's level: the answer holds every comparison it makes to one "+
		"family-wise level, step-down, so that once the clear differences are set apart the %d comparisons that can still change "+
		"the answer (the leader against each of the %d other candidates, on each measure that decides) share it; round k's look "+
		"spends %.0f%%/2^k of the family-wise %.0f%%, up to %d rounds: at the first, each of them is held to %.2g%%.\n",
		pl.Family, max(len(pl.Candidates)-1, 0), 100*Alpha, 100*Alpha, Looks, 100*pl.Level)
	if p.intends(IntentEfficiency) {
		fmt.Fprintf(&b, "  speed: %d independent trials a side (each on fresh servers) to see a %.0f%% difference in throughput (power %.0f%% "+
			"each, %.0f%% for the answer)\n",
			pl.Trials, 100*(MarginSpeed-1), 100*pl.PowerEach, 100*Power)
		fmt.Fprintf(&b, "  lock bugs: %d tested injections a side of a class to see a lock that double-grants in %.0f%% of them "+
			"against one that never does (power %.0f%% each)\n",
			pl.Injections, 100*MarginBug, 100*pl.PowerEach)
	}
	if p.intends(IntentCorrectness) {
		fmt.Fprintf(&b, "  qualification: %d tested injections of each class without a lock bug bound its rate below %.0f%% at 95%%; "+
			"one lock bug disqualifies at once\n",
			pl.Qualify, 100*MarginQualify)
	}
	faults := 0
	for _, c := range pl.Cases {
		if c.Fault.Name != "none" {
			faults++
		}
	}
	fmt.Fprintf(&b, "\nRound 1: %d cases (%d under faults, %d injections each; %d on fresh servers), estimated %s.\n",
		len(pl.Cases), faults, roundOneInjections, countFresh(pl), seconds(pl.Estimate))
	fmt.Fprintf(&b, "Deciding every comparison would take about %s; ", seconds(pl.Whole))
	if pl.Budget == 0 {
		fmt.Fprintln(&b, "no budget given: the rounds go on until the answer is decided or the looks are spent.")
	} else {
		fmt.Fprintf(&b, "the budget is %s, its last %s kept for the answer and the report: later rounds spend what round 1 leaves "+
			"on what is still undecided", seconds(pl.Budget), seconds(Closing(pl.Budget)))
		if pl.RoundOne > 0 {
			fmt.Fprintf(&b, " (round 1 starts no case after %s, however slow the machine)", seconds(pl.RoundOne))
		}
		fmt.Fprintln(&b, ".")
	}
	if len(pl.Cut) > 0 {
		fmt.Fprintf(&b, "Left out of round 1 for the budget (%d): a candidate is not judged without them until a round runs them:\n",
			len(pl.Cut))
		for _, c := range pl.Cut {
			fmt.Fprintf(&b, "  - %s\n", c)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func countFresh(pl *Plan) int {
	n := 0
	for _, c := range pl.Cases {
		if c.Fresh {
			n++
		}
	}
	return n
}

func orNone(s string) string {
	if s == "" {
		return "nothing yet"
	}
	return s
}
