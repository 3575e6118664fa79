package advise

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
	"github.com/lockbench/lockbench/suites"
	"github.com/lockbench/lockbench/workloads"
)

// The plan's statistics: the family-wise level, the looks (rounds) it
// is spent over, and the practical margins each comparison must be able
// to see.
const (
	// Alpha is the family-wise error rate of one answer.
	Alpha = 0.05
	// Looks is the most rounds a plan runs: look k spends Alpha/2^k
	// (package answer), so that every look together spends at most Alpha.
	Looks = 3
	// MarginBug is the difference in lock-bug rate per tested injection
	// (0 against this) that the efficiency ranking must be able to see.
	MarginBug = 0.5
	// MarginQualify is the lock-bug rate a qualifier's zero must bound
	// (at 95%) for a correctness answer: 10 tested injections a class.
	MarginQualify = 0.26
	// Power is the chance of seeing a difference at the margin.
	Power = 0.8
	// MarginSpeed is the throughput ratio speed must be able to see, and
	// spreadSpeed the spread of log throughput over fresh trials it
	// plans with (package answer's).
	MarginSpeed = 1.25
	spreadSpeed = 0.2
	// roundOneInjections is what round 1 injects per fault case: enough
	// to see a lock bug that is common; the rounds add where it counts.
	roundOneInjections = 3
	// roundOneTrials is round 1's independent trials a side for speed.
	roundOneTrials = 4
	// perfSeconds is how long each fresh speed trial runs.
	perfSeconds = 2
	// maxInjections bounds one case's injections (a round splits more
	// over trials).
	maxInjections = 10
)

// Candidate is a backend the plan puts forward.
type Candidate struct {
	// Spec is the backend as written (redlock, postgres?mode=advisory).
	Spec string
	// Kind is its servers' kind.
	Kind string
	// Have is set when the team runs servers of Kind: no new
	// infrastructure.
	Have bool
}

// Class is a fault class and whether the plan runs it, with why.
type Class struct {
	Name string
	// Spec is the fault as the cases run it, with params from the
	// profile (client-pause?x=2).
	Spec string
	In   bool
	Why  string
}

// Plan is what advise runs for a profile, decided before any server
// starts.
type Plan struct {
	Profile    Profile
	Budget     time.Duration
	Candidates []Candidate
	Classes    []Class
	// Family is the comparisons that can change the answer (the leader
	// against each contender, on each deciding measure); Level the level
	// each is held to at the first look: its share, Alpha/2, over Family.
	// The answer's step-down procedure reaches that level once the
	// comparisons with clear differences are set apart.
	Family int
	Level  float64
	// PowerEach is the power each of the leader's comparisons is planned
	// at, Power^(1/m) for m contenders: the answer is decided only when
	// the leader beats each of them (answer.needs plans the rounds so).
	PowerEach float64
	// Trials are the independent trials a side speed needs; Injections
	// the tested injections a side a lock-bug rate needs; Qualify the
	// tested injections without a lock bug that bound the rate below
	// MarginQualify.
	Trials, Injections, Qualify int
	// Cases are round 1's, in the order they run; Estimate their time.
	Cases    []bench.Case
	Estimate time.Duration
	// RoundOne is how long round 1 starts cases for (zero: until the
	// rounds' time ends): three quarters of the rounds' part of a
	// service's budget (Closing is kept for the answer), so that the
	// rounds keep a quarter for what the answer still needs — the
	// survivors' classes round 1 did not reach — however slow the
	// machine; make bench runs its whole catalogue first.
	RoundOne time.Duration
	// Whole is the time every planned comparison would need to be
	// decided; Cut says what round 1 leaves out for the budget.
	Whole time.Duration
	Cut   []string
	// Skipped are the classes the suite leaves out for a backend, and
	// why (results.File.Skipped).
	Skipped []results.Skip

	suite suites.Suite
}

// New plans the experiment for p within budget (no cap when 0). It
// starts nothing.
func New(p Profile, budget time.Duration) (*Plan, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if budget < 0 {
		return nil, fmt.Errorf("%w: budget %v: must be positive", ErrProfile, budget)
	}
	pl := &Plan{Profile: p, Budget: budget}
	pl.candidates()
	pl.classes()
	pl.statistics()
	if err := pl.build(); err != nil {
		return nil, err
	}
	return pl, nil
}

// isDefault reports whether p is make bench's profile, whose plan is the
// default suite's sweep and catalogue.
func (p Profile) isDefault() bool { return reflect.DeepEqual(p, Default()) }

// candidates lists the profile's backends, or the default suite's (but
// the control, and the variants the suite runs under a few faults only
// to show what a setting buys: redlock?quarantine=false), the team's
// kinds first.
func (pl *Plan) candidates() {
	specs := pl.Profile.Backends
	if len(specs) == 0 {
		// The default suite's backends that run its speed sweep: the
		// ablation variants run a few faults only.
		d, _ := suites.Default().Plan()
		for _, c := range d.Cases {
			if c.Fault.Name == "none" && c.ClientsAs == results.ClientsGoroutines && !c.Backend.Descriptor.Control &&
				!slices.Contains(specs, c.Backend.Spec) {
				specs = append(specs, c.Backend.Spec)
			}
		}
	}
	for _, s := range specs {
		b, _ := bench.ParseBackend(s) // Validate parsed them
		kind := string(b.Descriptor.Servers.Kind)
		pl.Candidates = append(pl.Candidates, Candidate{Spec: s, Kind: kind, Have: slices.Contains(pl.Profile.Have, kind)})
	}
	slices.SortStableFunc(pl.Candidates, func(a, b Candidate) int {
		return boolRank(a.Have) - boolRank(b.Have)
	})
}

func boolRank(have bool) int {
	if have {
		return 0
	}
	return 1
}

// classes decides which fault classes matter for the profile, and why.
func (pl *Plan) classes() {
	p := pl.Profile
	eff, cor := p.intends(IntentEfficiency), p.intends(IntentCorrectness)
	add := func(name, spec string, in bool, why string) {
		if spec == "" {
			spec = name
		}
		pl.Classes = append(pl.Classes, Class{Name: name, Spec: spec, In: in, Why: why})
	}
	add("none", "", true, "the baseline: speed from independent trials on fresh servers, and fault-free safety")
	if p.MaxPause > 0 {
		x := math.Max(p.MaxPause.Seconds()/p.TTL.Seconds(), 0.05)
		spec := "client-pause"
		if p.isDefault() {
			x = 1.5
		} else {
			spec = "client-pause?x=" + strconv.FormatFloat(x, 'g', 3, 64)
		}
		add("client-pause", spec, true,
			fmt.Sprintf("holders stall up to %v (%.2g leases): a lease that expires under a stall lets another in", p.MaxPause, x))
	} else {
		add("client-pause", "", false, "the profile's holders never stall (max-pause 0)")
	}
	add("server-pause", "", true, "a server that stalls (GC, VM) is the commonest fault: what it costs in grants, and whether a lock holds")
	add("failover", "", cor || eff, "Sentinel only: a promoted replica that never got the lock")
	add("restart", "", true, "a server restarted without its data: availability, and a lock lost with it")
	add("crash-minority", "", true, "a minority of a quorum's nodes crash: a quorum lock should not notice")
	if cor && p.isDefault() {
		add("latency", "", false, "slow links under a lease's timing: make bench leaves them to make bench-full, for its 15 minutes")
	} else {
		add("latency", "", cor, orWhy(cor, "slow links under a lease's timing", "efficiency: slow links cost speed, which the baseline measures"))
	}
	for _, c := range []string{"partition-leader", "partition-halves", "leader-kill"} {
		add(c, "", cor, orWhy(cor, "a consensus lock's leader lost or cut off", "efficiency: a leader's loss costs what crash-minority measures"))
	}
	add("partition", "", true, "clients cut off from the servers: who keeps the lock, and for how long nobody gets it")
	if p.ClockStep > 0 {
		by := math.Max(p.ClockStep.Seconds()/p.TTL.Seconds(), 0.05)
		spec := "clock-jump"
		if !p.isDefault() {
			spec = "clock-jump?by=" + strconv.FormatFloat(by, 'g', 3, 64)
		}
		add("clock-jump", spec, cor, orWhy(cor, fmt.Sprintf("the servers' clocks step up to %v: keys that expire early", p.ClockStep),
			"efficiency: a clock step's double grant is a correctness question"))
	} else {
		add("clock-jump", "", false, "the profile's clocks only slew (clock-step 0)")
	}
	add("clock-rate", "", false, "clocks slew within NTP's 500 ppm: 0.05% of a lease, inside every backend's margin (make bench-full runs it)")
	add("power-loss", "", cor, orWhy(cor, "servers that lose power lose what they did not sync: a lock granted twice",
		"efficiency: a power loss's availability cost is a restart's, measured under restart"))
}

func orWhy(in bool, yes, no string) string {
	if in {
		return yes
	}
	return no
}

// statistics sizes the samples each comparison needs at the first
// look's level: the leader against each other candidate, on each
// measure that decides (lock bugs, availability and speed for
// efficiency; availability and speed among correctness's qualifiers),
// Alpha/2 over them (Bonferroni; the decision's Tarone correction can
// only do better).
func (pl *Plan) statistics() {
	measures := 0
	if pl.Profile.intends(IntentEfficiency) {
		measures += 3
	}
	if pl.Profile.intends(IntentCorrectness) {
		measures += 2
	}
	pl.Family = max(len(pl.Candidates)-1, 1) * measures
	pl.Level = Alpha / 2 / float64(pl.Family)
	pl.PowerEach = math.Pow(Power, 1/float64(max(len(pl.Candidates)-1, 1)))
	pl.Trials = TrialsToSeparate(MarginSpeed, spreadSpeed, pl.Level, pl.PowerEach)
	pl.Injections = InjectionsToSeparate(MarginBug, pl.Level, pl.PowerEach)
	pl.Qualify = InjectionsToBound(MarginQualify, 0.95)
}

// InjectionsToSeparate is the fewest tested injections a side with which
// the one-sided exact test (Fisher's, as stats.RankSumAbove computes it
// on 0/1 samples) sets a lock with no lock bug apart from one with a
// lock bug in a share margin of its injections, at level, with
// probability power; 0 past 200.
func InjectionsToSeparate(margin, level, power float64) int {
	for n := 2; n <= 200; n++ {
		zeros := make([]float64, n)
		seen := 0.0
		for k := 0; k <= n; k++ {
			ys := make([]float64, n)
			for i := range k {
				ys[i] = 1
			}
			s, err := stats.RankSumAbove(ys, zeros, 0)
			if err == nil && s.P <= level {
				seen += binomialPMF(n, k, margin)
			}
		}
		if seen >= power {
			return n
		}
	}
	return 0
}

// TrialsToSeparate is the fewest independent trials a side (at least 3)
// with which a one-sided test on log throughput at level sees a ratio
// margin with probability power, for trials whose log throughput
// spreads by sd: the normal approximation, plus one for the
// t-distribution's heavier tails.
func TrialsToSeparate(margin, sd, level, power float64) int {
	z := zAbove(level) + zAbove(1-power)
	d := math.Log(margin)
	return max(int(math.Ceil(2*z*z*sd*sd/(d*d)))+1, 3)
}

// zAbove is the standard normal quantile with p above it.
func zAbove(p float64) float64 { return math.Sqrt2 * math.Erfinv(1-2*p) }

// InjectionsToBound is the fewest tested injections without a lock bug
// whose one-sided upper bound at confidence lies at or below rate.
func InjectionsToBound(rate, confidence float64) int {
	for n := 1; n <= 1000; n++ {
		if b, err := stats.UpperBound(0, n, confidence); err == nil && b <= rate {
			return n
		}
	}
	return 0
}

func binomialPMF(n, k int, p float64) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}

// Suite is the profile as a suite: the default suite's catalogue and
// settings with the profile's candidates, classes, load and guards.
func (pl *Plan) Suite() suites.Suite { return pl.suite }

// build expands the plan's suite into round 1's cases and fits them to
// the budget.
func (pl *Plan) build() error {
	p := pl.Profile
	s := suites.Default()
	s.Name = "advise"
	var specs []string
	for _, c := range pl.Candidates {
		specs = append(specs, c.Spec)
	}
	if !p.isDefault() {
		// make bench keeps the default suite's rules (every backend, the
		// control too); otherwise the budget, not the suite's rules,
		// decides what runs where.
		s.Workloads = []workloads.Workload{p.Workload()}
		s.Clients, s.ManyKeysClients = []int{p.Clients}, nil
		s.FaultClients = p.Clients
		s.Keys = max(p.Keys, 1)
		s.Hold = p.Hold()
		s.TTL = p.TTL
		s.Guards = guards(p.Token)
		// A fresh server's first connections take a good part of the
		// suite's 0.5 s on a loaded machine (trials of 0 grants seen):
		// the speed that ranks comes from 2 s.
		s.PerfSeconds = perfSeconds
		s.Leases = nil
		if p.AutoExtend {
			hold, _ := workloads.Uniform(2*p.TTL, 3*p.TTL)
			s.Leases = []suites.LeaseLoad{{AutoExtend: true, Hold: hold, AcquireTimeout: 10 * p.TTL, Clients: 3, Seconds: 5,
				Faults: []string{"client-pause?at=extend"}}}
		}
	}
	// Round 1 gives speed the trials a large difference needs (6× shows
	// in 3 a side); the rounds add where the answer stays tied.
	if !p.isDefault() {
		s.PerfTrials = max(min(pl.Trials, roundOneTrials), s.PerfTrials)
	}
	if !p.intends(IntentEfficiency) && !p.isDefault() {
		s.PerfTrials = 1 // correctness ranks on speed last: one trial each for the record
	}
	s.Injections = roundOneInjections
	if !p.isDefault() {
		faults := []string{suites.Sweep}
		for _, c := range pl.Classes {
			if c.In {
				faults = append(faults, c.Spec)
			}
		}
		s.Rules = rules(specs, faults)
	}
	pl.suite = s
	plan, err := s.Plan()
	if err != nil {
		return err
	}
	cases := plan.Cases
	pl.Skipped = plan.Skipped
	cases = pl.shape(cases)
	pl.Whole = pl.whole(cases)
	var left []results.Skip
	pl.Cases, pl.Cut, left = pl.fit(cases)
	pl.Skipped = append(pl.Skipped, left...)
	pl.Estimate = Estimate(pl.Cases)
	if pl.Budget > 0 && !p.isDefault() {
		pl.RoundOne = forRounds(pl.Budget) * 3 / 4
	}
	return nil
}

// rules are a hand-built suite's rules: specs run faults (suites.Sweep
// for the speed sweep), and a power loss under the durability profiles
// whose promises it tests (fast keeps nothing by design).
func rules(specs, faults []string) []suites.Rule {
	return []suites.Rule{
		{Backends: suites.Specs(specs...), Faults: faults},
		{Faults: []string{"power-loss"}, Profiles: []string{results.DurabilityPeriodic, results.DurabilityDurable}},
	}
}

// guards are the guards a resource that can do token checks with its
// fencing token needs judged, besides none.
func guards(token string) []judge.Guard {
	switch token {
	case TokenWrite:
		return []judge.Guard{judge.GuardNone, judge.GuardFence}
	case TokenReadWrite:
		return []judge.Guard{judge.GuardNone, judge.GuardFenceRW}
	}
	return []judge.Guard{judge.GuardNone}
}

// shape gives the cases what the suites refuse as flags: the profile's
// auto-extension and an acquire timeout its holds fit, sections held
// long enough that a restart's recovery fits inside them under the
// classes that lose data, and fresh servers for the baseline's trials,
// grouped so that each backend's trial runs on servers of its own.
func (pl *Plan) shape(cases []bench.Case) []bench.Case {
	p := pl.Profile
	if !p.isDefault() {
		wait := max(workloads.DefaultAcquireTimeout, 2*p.TTL, time.Duration(p.Clients)*p.HoldP99*2)
		for i := range cases {
			c := &cases[i]
			if c.Spec.Load() != "" {
				continue // the lease loads' own
			}
			c.Spec.AutoExtend = p.AutoExtend
			c.Spec.AcquireTimeout = wait
			if losesData(c.Fault.Class()) && p.HoldP50 < recoveryHold {
				c.Spec.Hold, _ = workloads.Uniform(recoveryHold, recoveryHold*3/2)
				if !p.AutoExtend && recoveryHold*3/2 >= c.Spec.TTL {
					c.Spec.AutoExtend = true
				}
				c.Spec.AcquireTimeout = max(wait, 10*recoveryHold)
			}
		}
	}
	var perf, rest []bench.Case
	for _, c := range cases {
		if c.Fault.Name == "none" && c.ClientsAs == results.ClientsGoroutines {
			c.Fresh = true
			perf = append(perf, c)
		} else {
			rest = append(rest, c)
		}
	}
	order := map[string]int{}
	for _, c := range perf {
		if _, ok := order[c.Backend.Spec]; !ok {
			order[c.Backend.Spec] = len(order)
		}
	}
	slices.SortStableFunc(perf, func(a, b bench.Case) int {
		if a.Trial != b.Trial {
			return a.Trial - b.Trial
		}
		return order[a.Backend.Spec] - order[b.Backend.Spec]
	})
	return append(perf, rest...)
}

// recoveryHold is the shortest section the plan holds under a fault that
// loses data: a server restarted takes up to about a second here to
// serve again, and the injection tests exclusion only when another
// client asks for the key while the lost section is still open.
const recoveryHold = time.Second

func losesData(class string) bool {
	return class == "restart" || class == "crash" || class == "power-loss" || class == "failover"
}
