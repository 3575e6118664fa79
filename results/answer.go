package results

// Answer is the decision of a run, as data: for each intent the profile
// asks about, the pick, its runner-up, whether the evidence decided it,
// the separations that decided it and what would settle what it could
// not. The decision procedure (package answer) writes it; the report
// renders it and CI reads it; nobody else decides.
type Answer struct {
	// Alpha is the family-wise error level the procedure keeps over
	// every look of the run: the chance that any answer of the run sets
	// apart two candidates that do not differ by their margin.
	Alpha float64 `json:"alpha"`
	// Looks records each call of the decision on this run's evidence,
	// the last one this answer's: a look spends part of Alpha, and the
	// next round's decision reads how much was spent before it.
	Looks []Look `json:"looks,omitempty"`
	// Correctness and Efficiency are the answers per intent; nil for an
	// intent the profile did not ask about.
	Correctness *Choice `json:"correctness,omitempty"`
	Efficiency  *Choice `json:"efficiency,omitempty"`
}

// Look is one call of the decision procedure on the evidence of a run.
type Look struct {
	// N numbers the look from 1.
	N int `json:"n"`
	// Cases is the number of cases the look saw: a decision on the same
	// evidence again (lockbench report re-rendering a run) is the same
	// look, not a new one.
	Cases int `json:"cases"`
	// Spent is the part of Alpha spent up to and including this look.
	Spent float64 `json:"spent"`
}

// Choice is the answer for one intent.
type Choice struct {
	// Intent is IntentCorrectness or IntentEfficiency.
	Intent string `json:"intent"`
	// Pick is the chosen candidate spec, or the candidates the evidence
	// cannot tell apart (a tie), best first; empty when none qualifies.
	Pick []string `json:"pick"`
	// RunnerUp is the candidate next after the pick, if any.
	RunnerUp string `json:"runner_up,omitempty"`
	// Decided is set when the pick is a single candidate set apart from
	// every contender at the family's level, or when no candidate
	// qualifies for a reason no further evidence can change.
	Decided bool `json:"decided"`
	// Reasons say why, in sentences, first the one that matters most.
	Reasons []string `json:"reasons,omitempty"`
	// Separations are the comparisons that set one candidate apart from
	// another.
	Separations []Separation `json:"separations,omitempty"`
	// Needs are the comparisons still undecided that could change the
	// answer, with the evidence that would settle each: the rounds of
	// lockbench advise run exactly these.
	Needs []Need `json:"needs,omitempty"`
	// NotTested names the fault classes this profile calls for that the
	// run did not test, each with why.
	NotTested []string `json:"not_tested,omitempty"`
	// Bounds are the pick's upper bounds in words ("no double grant in 10
	// power losses: at most 26% at 95%").
	Bounds []string `json:"bounds,omitempty"`
	// Unqualified names the candidates out of a correctness answer, each
	// with why.
	Unqualified []string `json:"unqualified,omitempty"`
}

// Separation is one comparison that set Winner apart from Loser.
type Separation struct {
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
	// Measure is what differed: MeasureLockBugs, MeasureAvailability or
	// MeasureSpeed.
	Measure string `json:"measure"`
	// Class is the fault class of the evidence ("" for speed, measured
	// without faults).
	Class string `json:"class,omitempty"`
	// P is the comparison's p-value and Level the level it had to reach
	// at its look (its share of the family's alpha).
	P     float64 `json:"p"`
	Level float64 `json:"level"`
}

// Need is one undecided comparison that could change the answer, and the
// evidence that would settle it at the family's level if the difference
// is at least the practical margin.
type Need struct {
	A       string `json:"a"`
	B       string `json:"b"`
	Measure string `json:"measure"`
	Class   string `json:"class,omitempty"`
	// Injections is the number of tested injections of Class each side
	// needs in all, and Trials the number of independent trials (fresh
	// servers) each side needs in all; zero when the measure needs none.
	Injections int `json:"injections,omitempty"`
	Trials     int `json:"trials,omitempty"`
}

// The measures a Separation or a Need compares on.
const (
	// MeasureLockBugs compares the share of tested injections of a class
	// with a lock bug (a second grant before the contract line).
	MeasureLockBugs = "lock-bugs"
	// MeasureAvailability compares the time without a grant after the
	// faults of a class.
	MeasureAvailability = "availability"
	// MeasureSpeed compares throughput over independent trials.
	MeasureSpeed = "speed"
	// MeasureJudged is no comparison: a candidate that is not judged yet
	// (a case the run stopped before, a class whose injections tested
	// nothing or whose case was invalid) needs the fault spec in Class
	// run again, to Injections tested injections in all, before it can
	// qualify or be ruled out. B is empty.
	MeasureJudged = "judged"
)

// SameAs reports whether t is the same separation as s (the same
// winner, loser, measure and class; p and level may differ).
func (s Separation) SameAs(t Separation) bool {
	return s.Winner == t.Winner && s.Loser == t.Loser && s.Measure == t.Measure && s.Class == t.Class
}
