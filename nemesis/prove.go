package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockbench/lockbench/judge"
)

// What makes an injection count (DESIGN.md): it met what its class is
// meant to test — the lock granted just before it, and, for the classes
// that test exclusion, a section of the faulted key was open when it
// struck — and its effect was read back from the servers (or the client
// process), not assumed. An injection that met nothing is recorded as not
// tested, with why, and the schedule makes up for it; one whose effect
// could not be read back is a failure of the fault, which makes its case
// invalid.

// proof is what one injection showed.
type proof struct {
	tested       bool
	whyNot       string
	precondition string
	effect       string
}

// strike is how a scenario breaks its targets, once per injection, in the
// loop of drive.
type strike struct {
	// label names the fault in its windows ("paused", "restart without
	// data"), after the targets' names.
	label string
	// class, when set, is the fault class the injection is counted under
	// (results.Target.Class): a mixed schedule's strikes each name theirs.
	class string
	// lasts is how long the fault stays in effect before undo heals it; 0
	// for a fault that strikes at once (a restart, a clock jump), whose
	// window closes when do returns.
	lasts time.Duration
	// hold, when positive, is the hold of the section whose grant the
	// strike waits for: long, for a fault whose effect on a held key is
	// the point (a restart, a clock jump), so that its holder is still
	// inside the section, and within its lease, when the fault strikes.
	hold time.Duration
	// exclusion says that the fault tests exclusion: a section must be
	// open when it strikes (every class but latency).
	exclusion bool
	// danger says that the fault may cost the section it met its lock (a
	// majority's restart, crash or power loss, a minority's crash): it is
	// tested only once the danger window is reached — after do returns
	// (the servers back, or the minority down), another client asks for
	// the section's key, or is granted it, while the section is still
	// open (Env.lostSection).
	danger bool
	// pick draws the targets of injection i.
	pick func(ctx context.Context, i int) ([]Node, error)
	// do breaks the targets, calls a.struck at the moment of the strike
	// (right before a signal or a cut that takes at once; right after a
	// kill that a long-held section outlives), reads back what it did, and
	// returns it in words. Its error is a fault that did not inject or
	// whose effect could not be read back (the injection failed), unless
	// it is an untested (the fault struck but could test nothing) or a
	// lost (the servers did not come back, which is the fault's outcome).
	// ctx ends with the window of a lasting fault.
	do func(ctx context.Context, a attempt) (effect string, err error)
	// undo heals a lasting fault after its window; nil for an instant
	// one.
	undo func(ctx context.Context, nodes []Node) error
}

// attempt is one injection as do sees it.
type attempt struct {
	nodes []Node
	// key is the key of the section the strike met ("" when none), and
	// holder the process holding it (-1 when none).
	key    string
	holder int
	// substr is what the case's keys on the servers contain: key, or the
	// case's key prefix when the strike met no section.
	substr string
	// struck marks the moment the fault took.
	struck func()
}

// untested is do's answer when the fault struck as planned but could
// test nothing (a jump of a clock the server never reads).
type untested struct{ why string }

func (u untested) Error() string { return u.why }

// lost is do's answer when the servers did not come back from the fault
// and that is its true outcome, not a failure to inject: their processes
// exited, refusing what their disks kept (an etcd majority that lost its
// data is refused: the cluster is gone). A server merely slow to become
// ready is not lost (see startAgain). The injection is tested; the case
// has no more.
type lost struct{ err error }

func (l lost) Error() string { return "the servers did not come back: " + l.err.Error() }

// grantWait bounds how long an injection waits for the lock to grant
// before it strikes anyway, untested: long enough for a lock to come back
// from the previous injection (Redlock's quarantine of one max TTL, a
// ZooKeeper election and the sessions after it).
func (e Env) grantWait() time.Duration {
	if e.wait > 0 {
		return e.wait
	}
	return max(4*e.Lease, 4*time.Second)
}

// tail is how long a case runs on after its last injection: the recovery
// its availability is measured on.
func (e Env) tail() time.Duration { return max(e.gap(), e.Spec.Duration/8) }

// drive is the schedule of the faults that strike on their own (every
// class but client-pause): at each of the case's slots it picks the
// targets, waits until the lock grants (at most grantWait), strikes while
// the section it granted is open, reads back what the fault did, and,
// for a lasting fault, heals it after its window. An injection that did
// not meet a granting lock, or a section open at its strike, is not
// tested, and the schedule strikes again, until the case has its tested
// injections (at most twice as many strikes) or its cap; the record says
// how many it got.
func (e Env) drive(s strike) plan {
	p := e.driveEach(e.slots(s.lasts, e.gap()), s.lasts, func(int) strike { return s })
	p.strike = &s
	return p
}

// driveEach is drive with a strike of its own for each injection (next),
// due at the times at, the longest lasting longest: a mixed schedule.
func (e Env) driveEach(at []time.Duration, longest time.Duration, next func(i int) strike) plan {
	want := len(at)
	per := longest + e.gap() + e.grantWait()
	return plan{planned: e.Spec.Duration, stretch: time.Duration(want) * per, schedule: func(ctx context.Context, nm *Nemesis) {
		var prevEnd time.Duration
		strikes := 0
		defer func() {
			if got := nm.tested(); got < want && strikes > 0 {
				nm.note("%d of the %d injections asked for tested what their class is meant to test (%d struck)", got, want, strikes)
			} else if strikes > want {
				nm.note("%d injections struck to get the %d tested ones asked for", strikes, want)
			}
		}()
		for i := 0; nm.tested() < want && i < 2*want; i++ {
			s := next(i)
			t := prevEnd + e.gap()
			if i < len(at) {
				t = max(t, at[i])
			}
			if !nm.at(ctx, t) {
				return
			}
			nodes, err := s.pick(ctx, i)
			if err == nil && len(nodes) == 0 {
				err = errors.New("no target")
			}
			if err != nil {
				if ctx.Err() == nil {
					nm.fail(fmt.Errorf("%s: picking the targets: %w", s.label, err))
				}
				prevEnd = nm.since()
				continue
			}
			target := e.describe(ctx, nodes)
			target.Class = s.class
			met := nm.meet(ctx, s.hold, e.grantWait())
			if ctx.Err() != nil {
				return
			}
			strikes++
			inj := nm.inject(fmt.Sprintf("%s %s", names(nodes), s.label), target)
			var (
				atStrike *judge.Live
				first    *look // at the strike, for the danger of a lasting fault
			)
			var grantsAtStrike atomic.Int64 // of the key the strike met; -1 before it
			grantsAtStrike.Store(-1)
			holder := -1
			if met.ok {
				holder = met.process
			}
			a := attempt{nodes: nodes, key: met.key, holder: holder, substr: cmp.Or(met.key, nm.keyPrefix()), struck: func() {
				if atStrike == nil {
					grantsAtStrike.Store(nm.grantsOf(met.key))
					x := look{live: nm.live()}
					if s.danger && s.lasts > 0 {
						x.acquiring = nm.acquiring()
					}
					atStrike, first = &x.live, &x
				}
			}}
			// The danger window of a fault that strikes at once opens when
			// its servers serve again, which can be before do has seen them
			// ready: it is watched from the strike on — a grant of the
			// key whenever it comes, a client asking once do returned.
			var (
				reach   chan proof
				stop    = func() {}
				serving atomic.Bool
			)
			if s.danger && met.ok && s.lasts == 0 {
				d := e.lostSection(nm, met, grantsAtStrike.Load, nil)
				d.serving = serving.Load
				reach, stop = watchDanger(ctx, nm, d)
			}
			until := time.Now().Add(s.lasts)
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
			if s.lasts > 0 {
				dctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), until)
			}
			effect, err := s.do(dctx, a)
			cancel()
			a.struck()
			serving.Store(true)
			if s.danger && met.ok && err == nil && s.lasts > 0 {
				// A lasting fault's danger begins at its strike, its nodes down.
				g := nm.grantsOf(met.key)
				reach, stop = watchDanger(ctx, nm, e.lostSection(nm, met, func() int64 { return g }, first))
			}
			if s.lasts > 0 {
				sleepUntil(ctx, until) // healed early if the case ends first
				hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
				if herr := s.undo(hctx, nodes); herr != nil {
					nm.fail(fmt.Errorf("%s %s: heal: %w", names(nodes), s.label, herr))
				}
				cancel()
			}
			inj.end()
			p := met.proof(s, *atStrike)
			p.effect = effect
			var u untested
			var l lost
			switch {
			case errors.As(err, &l):
				stop()
				p.effect = strings.TrimPrefix(strings.Join([]string{effect, l.Error()}, "; "), "; ")
				inj.prove(p)
				nm.lose(l.Error())
				nm.note("injection %d: %s; the case has no more injections", inj.index+1, l.Error())
				return
			case errors.As(err, &u):
				stop()
				p.tested, p.whyNot = false, u.why
			case err != nil:
				stop()
				// The case is invalid: no more injections.
				nm.fail(fmt.Errorf("%s %s: %w", names(nodes), s.label, err))
				p.tested, p.whyNot = false, "the fault failed: "+err.Error()
				inj.prove(p)
				return
			case reach != nil:
				r := <-reach
				stop()
				switch {
				case !p.tested:
				case r.tested:
					p.precondition += "; the danger window was reached: " + r.whyNot
				default:
					p.tested, p.whyNot = false, r.whyNot
					p.precondition += "; " + r.whyNot
				}
			}
			inj.prove(p)
			prevEnd = nm.since()
		}
		nm.at(ctx, prevEnd+e.tail())
	}}
}

// watchDanger watches d's danger window until it is reached or cannot
// be (or ctx ends, or stop is called), and sends what it found.
func watchDanger(ctx context.Context, nm *Nemesis, d danger) (reach chan proof, stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	reach = make(chan proof, 1)
	go func() {
		ok, said := reachedWhileOpen(wctx, nm, d)
		reach <- proof{tested: ok, whyNot: said}
	}()
	return reach, cancel
}

// met is what an injection met before it struck.
type met struct {
	ok      bool
	why     string // when not ok
	key     string
	section int64
	process int           // the section's holder
	granted time.Duration // since the start
	waited  time.Duration
}

// meet waits until the lock grants (bounded by wait), the grant's
// section held for hold when positive, and returns what the strike will
// meet. The judge's hook hands the grant over before the holder hears of
// it, so its section is open when meet returns.
func (nm *Nemesis) meet(ctx context.Context, hold, wait time.Duration) met {
	from := nm.since()
	grants := nm.arm(judge.Action{Hold: hold})
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ev := <-grants:
		return met{ok: true, key: ev.Key, section: ev.Section, process: ev.Process, granted: ev.Granted, waited: ev.Granted - from}
	case <-t.C:
	case <-ctx.Done():
	}
	nm.disarm()
	l := nm.live()
	why := fmt.Sprintf("the lock granted nothing in the %v before the strike", wait.Round(time.Millisecond))
	if l.Grants > 0 {
		why += fmt.Sprintf(" (its last grant was at %.2fs)", l.LastGrant.Seconds())
	}
	return met{why: why}
}

// proof says whether what the strike met makes it a test of its class,
// given the judge's view at the moment it struck.
func (m met) proof(s strike, at judge.Live) proof {
	if !m.ok {
		return proof{whyNot: m.why, precondition: m.why}
	}
	pre := fmt.Sprintf("the lock granted section %d at %.3fs, %v after the injection was due", m.section, m.granted.Seconds(),
		m.waited.Round(time.Millisecond))
	if !s.exclusion {
		return proof{tested: true, precondition: pre}
	}
	open := 0
	for _, o := range at.Open {
		if o.Section == m.section {
			return proof{tested: true, precondition: pre + "; it was open when the fault struck"}
		}
		open++
	}
	if open > 0 && s.hold == 0 {
		// Sections of a hot key follow one another within a millisecond:
		// the one granted may have ended, another was open.
		return proof{tested: true, precondition: fmt.Sprintf("%s; section %d was open when the fault struck", pre, at.Open[0].Section)}
	}
	why := fmt.Sprintf("no section was open when the fault struck (section %d, granted at %.3fs, had ended)", m.section, m.granted.Seconds())
	return proof{whyNot: why, precondition: pre + "; " + why}
}

// sleepUntil waits until t, or until ctx ends (then it returns false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// lose records that the servers did not come back from a fault: the
// runner must not use them again.
func (nm *Nemesis) lose(why string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	if nm.lost == "" {
		nm.lost = why
	}
}
