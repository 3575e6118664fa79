package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mixed is Jepsen's nemesis schedule: for the whole case, an injection
// every few seconds, each of a class drawn from the case's seed among
// those that apply to the backend's servers, composed pairs included.
// Each injection is proven as its class proves it, and recorded with its
// class (results.Target.Class), so that rates and bounds stay per class.
var mixed = &Scenario{
	Name: "mixed",
	Doc: "a seeded schedule over the whole case, an injection every few seconds, each of a class drawn among those that " +
		"apply to the servers: " +
		"server-pause, crash-minority, partition, partition-leader, partition-halves, leader-kill, restart, clock-jump, clock-rate, " +
		"and the composed pairs server-pause+partition, restart+partition, clock-jump+restart; each proven as its class proves it and " +
		"recorded with its class",
	Params: map[string]string{"seconds": "the case's length, at least, in seconds (default: the run's --duration)"},
	Note: "a mixed case's injections are counted per class (each injection records its own): a rate or bound of the case as a whole " +
		"pools classes, which the answer never does",
	// The clock faults need the preload, partitions the namespaces: the
	// servers start with whichever their kind offers, and the schedule
	// draws from what applies to them.
	Needs:    Needs{Netns: true, FakeClock: true, Optional: true},
	MinTTL:   2 * time.Second,
	Requires: Servers,
	check:    checkSeconds,
	span:     lasting,
	length: func(p url.Values, _ time.Duration) time.Duration {
		s, _ := strconv.Atoi(p.Get("seconds"))
		return time.Duration(s) * time.Second
	},
	plan: mixedPlan,
}

// mixClass is a class a mixed schedule draws: one scenario, or a pair
// struck together (in order: the second strikes once the first's strike
// is read back).
type mixClass []*Scenario

// name is the class as results record it: its scenarios joined by "+".
func (m mixClass) name() string {
	var s []string
	for _, sc := range m {
		s = append(s, sc.Name)
	}
	return strings.Join(s, "+")
}

// mixClasses are the classes a mixed schedule draws from, where they
// apply. The pairs are the ones the issue names: a member paused while
// the clients lose a minority; a majority restarted, then a minority cut
// from the clients as they come back (the cut comes second: a cut node
// cannot be probed ready); a clock jumped, then the nodes restarted
// under it.
var mixClasses = []mixClass{
	{serverPause}, {crashMinority}, {partition}, {partitionLeader}, {partitionHalves}, {leaderKill},
	{restart}, {clockJump}, {clockRate},
	{serverPause, partition}, {restart, partition}, {clockJump, restart},
}

// checkSeconds refuses a seconds param that is not a whole number of
// seconds from 1 to an hour.
func checkSeconds(v url.Values) error {
	if s := v.Get("seconds"); s != "" {
		if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 3600 {
			return fmt.Errorf("seconds=%q: want a whole number of seconds, 1 to 3600", s)
		}
	}
	return nil
}

// mixedPlan draws the schedule of one mixed case: the classes that apply
// to e's target, an injection at each slot that fits the case, each
// slot's class drawn from e.Rand (the case's seed), and the strikes made
// up for untested ones drawn too.
func mixedPlan(e Env) plan {
	classes := applicable(e.Target.Shape())
	if len(classes) == 0 {
		return plan{planned: e.Spec.Duration}
	}
	var (
		names   []string
		strikes []strike
		longest time.Duration
	)
	for _, c := range classes {
		s := c.strike(e)
		names, strikes, longest = append(names, c.name()), append(strikes, s), max(longest, s.lasts)
	}
	at, drawn := e.mixSchedule(longest, len(strikes))
	p := e.driveEach(at, longest, func(i int) strike { return strikes[drawn[i%len(drawn)]] })
	// Untested strikes are made up within one more strike's time: the
	// schedule fills the case, not a count asked for.
	p.stretch = longest + e.gap() + e.grantWait()
	schedule := p.schedule
	p.schedule = func(ctx context.Context, nm *Nemesis) {
		counts := map[string]int{}
		for _, d := range drawn[:len(at)] {
			counts[names[d]]++
		}
		var said []string
		for _, n := range names {
			said = append(said, fmt.Sprintf("%s %d", n, counts[n]))
		}
		nm.note("mixed schedule of %d injections drawn from the %d classes that apply here: %s", len(at), len(names), strings.Join(said, ", "))
		schedule(ctx, nm)
	}
	return p
}

// applicable returns the classes of mixClasses whose every scenario fits
// a cluster of shape sh.
func applicable(sh Shape) []mixClass {
	var out []mixClass
	for _, c := range mixClasses {
		if !slices.ContainsFunc(c, func(s *Scenario) bool { return s.Fits(sh) != nil }) {
			out = append(out, c)
		}
	}
	return out
}

// mixSchedule draws a mixed case's schedule from e.Rand: when each
// injection is due (as many as fit the case, each with a window of up to
// longest and the gap after it) and, for each, and for as many strikes
// again to make up for untested ones, which of n classes strikes.
func (e Env) mixSchedule(longest time.Duration, n int) ([]time.Duration, []int) {
	many := e
	many.Injections = max(e.Injections, int(e.Spec.Duration/(longest+e.gap()))+1)
	at := many.slots(longest, e.gap())
	drawn := make([]int, 2*len(at))
	for i := range drawn {
		drawn[i] = e.Rand.IntN(n)
	}
	return at, drawn
}

// strike is the strike of class m on e's target: the one its scenario
// drives, or a pair's composed.
func (m mixClass) strike(e Env) strike {
	sub := e
	sub.Params, sub.Injections = url.Values{}, 1
	parts := make([]strike, len(m))
	for i, sc := range m {
		parts[i] = *sc.plan(sub).strike
	}
	if len(parts) == 1 {
		s := parts[0]
		s.class = m.name()
		return s
	}
	return composed(m.name(), parts)
}

// composed strikes parts as one injection of class: each picks its own
// targets, and they strike in order within one window (the longest of
// theirs), each read back; the lasting ones heal in reverse order after
// it. The first part marks the strike. A part that fails or tests
// nothing ends the injection there, with what the parts before it did.
func composed(class string, parts []strike) strike {
	c := strike{class: class}
	var labels []string
	for _, p := range parts {
		labels = append(labels, p.label)
		c.lasts, c.hold = max(c.lasts, p.lasts), max(c.hold, p.hold)
		c.exclusion, c.danger = c.exclusion || p.exclusion, c.danger || p.danger
	}
	c.label = strings.Join(labels, " + ")
	// picked holds each part's targets for the injection under way: drive
	// runs one injection at a time.
	picked := make([][]Node, len(parts))
	c.pick = func(ctx context.Context, i int) ([]Node, error) {
		var all []Node
		for j, p := range parts {
			nodes, err := p.pick(ctx, i)
			if err != nil {
				return nil, err
			}
			picked[j] = nodes
			for _, n := range nodes {
				if !slices.Contains(all, n) {
					all = append(all, n)
				}
			}
		}
		slices.SortFunc(all, func(a, b Node) int { return strings.Compare(a.String(), b.String()) })
		return all, nil
	}
	c.do = func(ctx context.Context, a attempt) (string, error) {
		// Each part gets its own context: a lasting one its whole window
		// from its own strike, an instant one (a restart) the time to
		// bring its nodes back; the injection's window ends once the
		// last lasting part's has.
		var (
			effects []string
			until   time.Time
		)
		defer func() { sleepUntil(context.WithoutCancel(ctx), until) }()
		for j, p := range parts {
			b := a
			b.nodes = picked[j]
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
			if p.lasts > 0 {
				end := time.Now().Add(p.lasts)
				pctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), end)
				if end.After(until) {
					until = end
				}
			}
			effect, err := p.do(pctx, b)
			cancel()
			if effect != "" {
				effects = append(effects, fmt.Sprintf("%s (%s): %s", p.label, names(b.nodes), effect))
			}
			if err != nil {
				return strings.Join(effects, "; "), err
			}
		}
		return strings.Join(effects, "; "), nil
	}
	c.undo = func(ctx context.Context, _ []Node) error {
		var errs []error
		for j := len(parts) - 1; j >= 0; j-- {
			if p := parts[j]; p.undo != nil {
				errs = append(errs, p.undo(ctx, picked[j]))
			}
		}
		return errors.Join(errs...)
	}
	return c
}
