package answer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lockbench/lockbench/results"
)

// simLock is a synthetic lock: the distributions its samples are drawn
// from.
type simLock struct {
	name  string
	speed float64 // median grants/s over fresh servers
	bugs  map[string]float64
	share float64 // in-fault grants as a share of the baseline
}

// simRun holds the samples drawn so far for each lock: the rounds add to
// them, never replace them.
type simRun struct {
	r      *rand.Rand
	locks  []simLock
	speeds map[string][]float64
	hits   map[string]map[string][]bool // lock, class: lock bug after each injection
	shares map[string]map[string][]float64
	recov  map[string]map[string][]float64
}

// simClasses are the fault classes of the synthetic runs.
var simClasses = []string{"restart", "client-pause"}

// simAvailability is the class whose fault windows record availability
// (one is enough to put the availability comparisons in the family; the
// exact rank-sum test of every window of both would make the 2,000
// simulated experiments minutes longer).
const simAvailability = "client-pause"

// simSpread is the spread of a lock's log throughput over fresh servers.
const simSpread = 0.15

func newSimRun(r *rand.Rand, locks []simLock, trials, injections int) *simRun {
	s := &simRun{r: r, locks: locks, speeds: map[string][]float64{}, hits: map[string]map[string][]bool{},
		shares: map[string]map[string][]float64{}, recov: map[string]map[string][]float64{}}
	for _, l := range locks {
		s.hits[l.name], s.shares[l.name], s.recov[l.name] = map[string][]bool{}, map[string][]float64{}, map[string][]float64{}
		s.trials(l.name, trials)
		for _, c := range simClasses {
			s.injections(l.name, c, injections)
		}
	}
	return s
}

func (s *simRun) lock(name string) simLock {
	for _, l := range s.locks {
		if l.name == name {
			return l
		}
	}
	panic("no lock " + name)
}

// trials raises a lock's independent trials to n.
func (s *simRun) trials(name string, n int) {
	l := s.lock(name)
	for len(s.speeds[name]) < n {
		s.speeds[name] = append(s.speeds[name], l.speed*math.Exp(simSpread*s.r.NormFloat64()))
	}
}

// injections raises a lock's tested injections of a class to n.
func (s *simRun) injections(name, class string, n int) {
	l := s.lock(name)
	for len(s.hits[name][class]) < n {
		s.hits[name][class] = append(s.hits[name][class], s.r.Float64() < l.bugs[class])
		s.shares[name][class] = append(s.shares[name][class], math.Max(0, l.share+0.1*s.r.NormFloat64()))
		s.recov[name][class] = append(s.recov[name][class], s.r.ExpFloat64()*0.5)
	}
}

// file writes the samples as a results file: a fault-free case per trial
// on fresh servers, and a case per lock and class with a target per
// injection.
func (s *simRun) file() *results.File {
	f := &results.File{}
	tested := true
	for _, l := range s.locks {
		for t, tp := range s.speeds[l.name] {
			f.Cases = append(f.Cases, results.Case{Backend: l.name, Workload: "uniform", Fault: "none", Guard: "none", Clients: 8,
				Trial: t + 1, FreshServers: true, Throughput: tp, Acquired: 1000, ContendedGrants: 500, Nodes: 1})
		}
		for _, c := range simClasses {
			hits := s.hits[l.name][c]
			n := len(hits)
			cs := results.Case{Backend: l.name, Workload: "uniform", Fault: c, FaultClass: c, Guard: "none", Clients: 8, Trial: 1,
				Injections: n, InjectionsTested: &n, Nodes: 1}
			if c == simAvailability {
				cs.Availability = &results.Availability{BaselineThroughput: 1000, RecoveryS: s.recov[l.name][c]}
			}
			for i, h := range hits {
				tg := results.Target{Injection: i + 1, Tested: &tested}
				if h {
					tg.Incidents, tg.IncidentsLockBug = 1, 1
					cs.Incidents++
					cs.IncidentsLockBug++
				}
				cs.Targets = append(cs.Targets, tg)
				if cs.Availability != nil {
					cs.Availability.WindowThroughput = append(cs.Availability.WindowThroughput, 1000*s.shares[l.name][c][i])
				}
			}
			f.Cases = append(f.Cases, cs)
		}
	}
	return f
}

// simOutcome is what one adaptive experiment answered.
type simOutcome struct {
	separated bool // some look set a backend apart
	rightPick bool // the last answer decided on the planted lock
	looks     int
	trials    int // the most independent trials a lock had at the end
}

// simulate runs the adaptive experiment: look, then feed every need of
// the answer (more trials, more injections of the class named) and look
// again, up to maxLooks looks or until the answer is decided.
func simulate(r *rand.Rand, locks []simLock, maxLooks int, planted string) simOutcome {
	const capSamples = 60 // the budget: samples a side at most
	s := newSimRun(r, locks, 3, 5)
	var out simOutcome
	var prev *results.Answer
	p := results.Profile{Intent: results.IntentEfficiency}
	for look := 1; look <= maxLooks; look++ {
		f := s.file()
		f.Answer = prev
		a, err := Decide(f, p)
		if err != nil {
			panic(err)
		}
		prev = &a
		out.looks = look
		for _, xs := range s.speeds {
			out.trials = max(out.trials, len(xs))
		}
		ch := a.Efficiency
		if len(ch.Separations) > 0 {
			out.separated = true
		}
		out.rightPick = ch.Decided && ch.Pick[0] == planted
		if ch.Decided || len(ch.Needs) == 0 {
			break
		}
		for _, n := range ch.Needs {
			for _, name := range []string{n.A, n.B} {
				if name == "" {
					continue
				}
				if n.Trials > 0 {
					s.trials(name, min(n.Trials, capSamples))
				}
				if n.Injections > 0 {
					cls, _, _ := cutProfile(n.Class)
					s.injections(name, cls, min(n.Injections, capSamples))
				}
			}
		}
	}
	return out
}

// cutProfile splits "restart (fast)" into its class and profile.
func cutProfile(label string) (string, string, bool) {
	for i := range label {
		if label[i] == ' ' {
			return label[:i], label[i+1:], true
		}
	}
	return label, "", false
}

// simLocks returns n synthetic locks alike, the first sped up by factor.
func simLocks(n int, factor float64) []simLock {
	var out []simLock
	for i := range n {
		l := simLock{name: fmt.Sprintf("lock%d", i), speed: 1000, bugs: map[string]float64{"restart": 0.2, "client-pause": 0}, share: 0.5}
		if i == 0 {
			l.speed *= factor
		}
		out = append(out, l)
	}
	return out
}

// TestAdaptiveErrorRate: on synthetic runs with no real difference
// between 4 locks (the same speed, lock-bug rates and availability), the
// adaptive experiment — up to 4 looks, each feeding the comparisons the
// answer says are undecided — sets a backend apart in at most 5% of
// 1,000 answers.
func TestAdaptiveErrorRate(t *testing.T) {
	skipSimulation(t)
	r := rand.New(rand.NewPCG(28, 1))
	const runs = simRuns
	sep, looks, trials := 0, 0, 0
	for range runs {
		o := simulate(r, simLocks(4, 1), 4, "")
		if o.separated {
			sep++
		}
		looks, trials = looks+o.looks, trials+o.trials
	}
	rate := float64(sep) / runs
	t.Logf("error: no real difference, 4 locks, up to 4 looks: a backend set apart in %d of %d answers (%.1f%%), %.2f looks and %.1f trials a side on average",
		sep, runs, rate*100, float64(looks)/runs, float64(trials)/runs)
	if rate > 0.05 {
		t.Errorf("false separations in %.1f%% of answers, want at most 5%%", rate*100)
	}
}

// TestAdaptivePower: with one of 4 locks faster by the practical margin
// (25%, with a spread of 15% over fresh servers) and nothing else
// different, the adaptive experiment decides on it — sets it apart from
// each of the 3 others, which is what an answer needs — in at least 80%
// of 1,000 answers. (That some backend is set apart from some other is
// no power to answer: it was 99% when the answer was decided in 71%.)
func TestAdaptivePower(t *testing.T) {
	skipSimulation(t)
	r := rand.New(rand.NewPCG(28, 2))
	const runs = simRuns
	sep, right, looks, trials := 0, 0, 0, 0
	for range runs {
		o := simulate(r, simLocks(4, speedMargin), 4, "lock0")
		trials += o.trials
		if o.separated {
			sep++
		}
		if o.rightPick {
			right++
		}
		looks += o.looks
	}
	power := float64(right) / runs
	t.Logf("power: one lock faster by the margin (%.2fx), 4 locks, up to 4 looks: decided on the faster one in %d of %d answers (%.1f%%); "+
		"some backend set apart in %d (%.1f%%); %.2f looks and %.1f trials a side on average",
		speedMargin, right, runs, power*100, sep, float64(sep)/runs*100, float64(looks)/runs, float64(trials)/runs)
	if power < Power {
		t.Errorf("decided on the faster lock in %.1f%% of answers, want at least %.0f%%", power*100, Power*100)
	}
}

// simRuns is the number of simulated experiments of each test.
const simRuns = 1000

// skipSimulation skips the 1,000 simulated experiments under -short, and
// under -race: they are computation in one goroutine, which the race
// detector slows tenfold (most of an hour on a loaded machine); make test
// runs them without it.
func skipSimulation(t *testing.T) {
	t.Helper()
	switch {
	case testing.Short():
		t.Skip("1,000 simulated experiments")
	case raceDetector:
		t.Skip("1,000 simulated experiments, computation in one goroutine: make test runs them without -race")
	}
}
