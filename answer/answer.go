// Package answer is the decision procedure of lockbench: from the
// evidence of a run (results.File) and the service it answers for
// (results.Profile) it decides, per intent, which lock to use — or the
// exact tie and what would settle it — as data (results.Answer) that the
// report renders, CI reads and the rounds of lockbench advise act on. It
// reads only results and stats, and decides nothing on a backend's name.
//
// How it decides:
//
//   - Qualification. Correctness: no lock bug (a second grant before
//     the contract line) in any tested injection, those of a case later
//     found invalid included — a lock bug seen is never erased; with the
//     guard the resource can do, no stale write, lost update or token
//     regression and the fenced-mutex check true; client-pause and a
//     server-side fault tested. Efficiency: no double grant, stale write
//     or lost update without faults, with at least 2 clients.
//   - Ranking among the qualifiers, in steps: lock bugs per tested
//     injection (efficiency; expired holders are the lease working,
//     reported and not ranked), availability (in-fault share and
//     recovery, past practical margins), speed (from independent trials
//     on fresh servers only). Two candidates are compared on the
//     classes both faced; a class only one faced is said so and never
//     leaves anyone else's comparison. At a step a candidate drops out
//     when another beats it and it beats that one nowhere.
//   - Error control. Every comparison of every pair of qualifiers, both
//     directions, on every ranking measure, is one family held by
//     Tarone's correction (exact tests whose best p-value cannot reach
//     the level do not count), applied step-down as Holm applies
//     Bonferroni's (each difference found relaxes the level of the
//     rest), to this look's share of alpha: look k
//     spends alpha/2^k, so that the whole run — however many rounds the
//     adaptive experiment takes, and whichever comparisons it feeds —
//     sets apart candidates that do not differ with probability at most
//     alpha (Bonferroni over looks). A decision on the same evidence
//     again is the same look.
//   - Needs: for the leader against each candidate still tied with it,
//     the tested injections or independent trials that would settle
//     their comparison at the next look's level, were they to differ by
//     the practical margin.
package answer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/lockbench/lockbench/results"
)

// Alpha is the family-wise error level of an answer over every look of
// a run: the chance that it sets apart two candidates that do not
// differ.
const Alpha = 0.05

// ErrProfile is the error of a profile the decision cannot read.
var ErrProfile = errors.New("bad profile")

// Decide decides the answer for profile p on the evidence of f, one
// choice per intent the profile asks about. f.Answer, when set, is the
// previous look's answer on this run: Decide counts this look after it
// (or as the same look when the evidence did not change) and spends
// alpha accordingly. It fails on a nil file or on a profile it cannot
// read, naming the bad value.
func Decide(f *results.File, p results.Profile) (results.Answer, error) {
	if f == nil {
		return results.Answer{}, errors.New("decide: no results file")
	}
	if err := check(p); err != nil {
		return results.Answer{}, err
	}
	ev := gather(f)
	cands, err := ev.candidates(p)
	if err != nil {
		return results.Answer{}, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	a := results.Answer{Alpha: Alpha, Looks: looks(f.Answer, len(f.Cases))}
	look := a.Looks[len(a.Looks)-1].N
	for _, intent := range p.Intents() {
		ch := decide(ev, cands, p, intent, lookLevel(look), lookLevel(look+1))
		switch intent {
		case results.IntentCorrectness:
			a.Correctness = ch
		case results.IntentEfficiency:
			a.Efficiency = ch
		}
	}
	return a, nil
}

// check refuses the profile values the decision reads and does not know.
func check(p results.Profile) error {
	switch p.Intent {
	case "", results.IntentBoth, results.IntentCorrectness, results.IntentEfficiency:
	default:
		return fmt.Errorf("%w: intent %q: want efficiency, correctness or both", ErrProfile, p.Intent)
	}
	switch p.Token {
	case "", results.TokenNone, results.TokenWrite, results.TokenReadWrite:
	default:
		return fmt.Errorf("%w: token %q: want none, write or read-write", ErrProfile, p.Token)
	}
	return nil
}

// looks returns the looks of this decision: the previous answer's, then
// this one — a new look when the evidence grew, the same look again when
// it did not.
func looks(prev *results.Answer, cases int) []results.Look {
	var out []results.Look
	if prev != nil {
		out = slices.Clone(prev.Looks)
	}
	if n := len(out); n > 0 && out[n-1].Cases == cases {
		return out
	}
	k := len(out) + 1
	return append(out, results.Look{N: k, Cases: cases, Spent: Alpha * (1 - math.Pow(2, -float64(k)))})
}

// lookLevel is the share of Alpha look k spends: Alpha/2^k.
func lookLevel(k int) float64 { return Alpha * math.Pow(2, -float64(k)) }

// decide answers one intent.
func decide(ev *evidence, cands []*backend, p results.Profile, intent string, level, next float64) *results.Choice {
	ch := &results.Choice{Intent: intent, Pick: []string{}}
	var tier []*backend
	var pending, out []standing
	for _, b := range cands {
		s := efficiency(b)
		if intent == results.IntentCorrectness {
			s = correctness(b, p)
		}
		if s.qualifies {
			tier = append(tier, b)
			continue
		}
		ch.Unqualified = append(ch.Unqualified, b.name+": "+s.reason)
		out = append(out, s)
		if !s.final {
			pending = append(pending, s)
		}
	}
	if len(tier) == 0 {
		ch.Decided = len(pending) == 0
		ch.Needs = judgedNeeds(pending)
		ch.Reasons = noneQualifies(cands, pending, ch.Needs, p, intent)
		if w := fenceWords(out, p); w != "" && intent == results.IntentCorrectness {
			ch.Reasons = slices.Insert(ch.Reasons, 1, w)
		}
		return ch
	}
	// With the servers the team runs named, the answer is among the
	// candidates on them when any qualifies; the others are named as what
	// the team would add.
	var added []string
	if len(p.Have) > 0 {
		var own []*backend
		for _, b := range tier {
			if owned(b, p.Have) == 1 {
				own = append(own, b)
			} else {
				added = append(added, b.name)
			}
		}
		if len(own) > 0 {
			tier = own
		} else {
			added = nil
		}
	}
	fam := build(tier, intent, level)
	left, seps := rank(fam, tier, intent, p.Have)
	for _, b := range left {
		ch.Pick = append(ch.Pick, b.name)
	}
	// The pick, and those tied with it, are decided only on every class
	// the plan put them through: a class never faced cannot have put one
	// out (efficiency; a correctness qualifier has no cut class).
	var unrun []results.Need
	for _, b := range left {
		unrun = append(unrun, cutNeeds(b)...)
	}
	// Nor while a candidate that could still join them is not judged yet
	// because planned cases of it did not run: one on the team's servers
	// when the pick is, any otherwise. (One not judged for what no round
	// can add, a variant never run without faults, waits for nothing.)
	// A candidate the team would add cannot join a pick on its servers:
	// what would judge it is not asked for then, so that the rounds spend
	// on the comparisons that can change the answer.
	ownTier := len(p.Have) > 0 && owned(tier[0], p.Have) == 1
	var joinable []standing
	var contenders []string
	for _, s := range pending {
		if ownTier && owned(s.b, p.Have) == 0 {
			continue
		}
		joinable = append(joinable, s)
		if len(s.b.cut) > 0 {
			contenders = append(contenders, s.b.name)
		}
	}
	judged := judgedNeeds(joinable)
	ch.Decided = len(left) == 1 && len(unrun) == 0 && len(contenders) == 0
	switch {
	case len(left) > 1:
		ch.RunnerUp = left[1].name
	case len(seps) > 0:
		ch.RunnerUp = runnerUp(seps, p.Have)
	}
	for _, s := range seps {
		ch.Separations = append(ch.Separations, results.Separation{
			Winner: s.by.better.name, Loser: s.loser.name, Measure: s.by.measure, Class: s.by.class, P: s.by.test.P, Level: s.by.level,
		})
	}
	ch.Needs = slices.Concat(unrun, needs(left, intent, next/float64(max(fam.k, 1))), judged)
	pick := left[0]
	ch.Reasons = reasons(ch, pick, left, seps, fam, p, intent, len(tier))
	if len(contenders) > 0 {
		ch.Reasons = slices.Insert(ch.Reasons, 1, fmt.Sprintf("Not decided yet: %s not judged, and could still qualify and change "+
			"this answer.", joinAnd(contenders)))
	}
	if len(added) > 0 {
		ch.Reasons = append(ch.Reasons, fmt.Sprintf("Qualified too, on servers you do not run (you would add them): %s.", joinAnd(added)))
	}
	ch.Bounds = bounds(pick, intent)
	ch.NotTested = notTested(ev, pick)
	return ch
}

// runnerUp is the candidate set apart at the last step reached, best
// first by the order of ties.
func runnerUp(seps []separation, have []string) string {
	last := seps[len(seps)-1].step
	var bs []*backend
	for _, s := range seps {
		if s.step == last {
			bs = append(bs, s.loser)
		}
	}
	order(bs, have)
	return bs[0].name
}
