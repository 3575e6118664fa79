package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/worker"
	"github.com/lockbench/lockbench/workloads"
)

// The client-pause scenario stops a client's process (SIGSTOP) for x
// leases at a point of its cycle (param at):
//
//   - before-read, after-read (default), after-write: in the judge's
//     answer to the holder's grant, read or write, which the holder waits
//     for anyway, so the pause lands exactly there at no cost in timing;
//   - acquire: a client that is in Acquire by the judge's live view (its
//     release answered, no grant since) is stopped at that moment, a
//     random one of its wait;
//   - granted: a client in Acquire is armed (worker.ArmSignal) and stops
//     itself once its Acquire returns a lease, before it reports the grant
//     to the judge, which hears of it only after the resume: the late
//     report the history must order by the lock's own bounds;
//   - extend: a holder whose lease extends itself (the load's
//     auto-extend) is stopped as soon as it says its watchdog has begun
//     an extension: the signal's own latency puts the stop at a random
//     moment of the extension, or past it.
//
// Where each pause really landed, the history says (history.Landings):
// one that missed its point is recorded so and not tested.

// pausePoints are the points at= takes, in the cycle's order.
var pausePoints = []history.Point{history.PointAcquire, history.PointGranted, history.PointBeforeRead, history.PointAfterRead,
	history.PointAfterWrite, history.PointExtend}

// pausePoint is the point the params aim at.
func pausePoint(p url.Values) history.Point {
	if at := p.Get("at"); at != "" {
		return history.Point(at)
	}
	return history.PointAfterRead
}

// checkClientPause refuses params client-pause does not take.
func checkClientPause(v url.Values) error {
	if at := v.Get("at"); at != "" && !slices.Contains(pausePoints, history.Point(at)) {
		return fmt.Errorf("at=%q: want one of %v", at, pausePoints)
	}
	return checkFloat(v, "x")
}

// CheckSpec returns nil if the fault can run under load s (normalized),
// or why not: a pause aimed inside an extension needs leases that extend
// themselves while their holders hold.
func (f Fault) CheckSpec(s workloads.Spec) error {
	if f.Scenario == nil || f.Name != "client-pause" || pausePoint(f.Params) != history.PointExtend {
		return nil
	}
	switch {
	case !s.AutoExtend:
		return faultErrorf("fault %s stops a holder inside an extension of its lease: run it with auto-extending leases (--auto-extend)", f.Spec)
	case s.HoldLeft == 0 && max(s.Hold.Max(), s.HoldFor) <= s.TTL/3:
		return faultErrorf("fault %s stops a holder inside an extension of its lease: holds of %v end before the first extension, at TTL/3 "+
			"(%v); hold for several TTLs", f.Spec, s.Hold, s.TTL/3)
	}
	return nil
}

// clientPausePlan is client-pause's plan.
func clientPausePlan(e Env) plan {
	d, gap := clientPause(e.Params, e.Lease), clientPauseGap(e.Lease)
	at := e.slots(d, gap)
	point := pausePoint(e.Params)
	switch point {
	case history.PointGranted:
		return aimedPauses(e, at, d, point, &selfStop{worker.ArmSignal, atGrant})
	case history.PointAcquire, history.PointExtend:
		return aimedPauses(e, at, d, point, nil)
	}
	pause := judge.Action{Pause: d, At: point}
	var (
		mu   sync.Mutex
		next int           // the slot of the next pause
		free time.Duration // no pause begins before: the last one's end and a gap
	)
	// The first grant at or after each slot's time is paused, unless the
	// previous pause (begun late, at a late grant) is not over.
	return plan{section: func(ev judge.SectionEvent) judge.Action {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(at) || ev.Granted < max(at[next], free) {
			return judge.Action{}
		}
		next++
		free = ev.Granted + d + gap
		return pause
	}}
}

// aimedPauses is the plan of pauses of d the nemesis aims itself, one in
// each slot of at: at a client in Acquire (acquire, granted), or at a
// holder whose lease is extending (extend). self, when set, arms the
// client to stop itself rather than be stopped.
func aimedPauses(e Env, at []time.Duration, d time.Duration, point history.Point, self *selfStop) plan {
	return plan{schedule: func(ctx context.Context, nm *Nemesis) {
		for _, t := range at {
			if !nm.at(ctx, t) {
				return
			}
			c := nm.judgeCase()
			var p int
			var ok bool
			if point != history.PointExtend {
				p, ok = aimAcquire(ctx, nm, c, e, t+d)
			} else {
				// An extension is in flight for a round trip every
				// TTL/3 of a hold: an aim shorter than half a lease
				// (a short pause's) would mostly find none.
				p, ok = aimExtend(ctx, nm, c, t+max(d, e.Lease/2))
			}
			if !ok {
				continue // no client there in this slot: the case says how many pauses it made
			}
			if self != nil {
				nm.armSelf(p, *self)
			}
			nm.fail(c.Pause(p, d, point))
		}
	}}
}

// judgeCase returns the case nm is attached to.
func (n *Nemesis) judgeCase() judge.Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c
}

// aimPoll is how often an aim looks at the judge's live view while no
// client is where it aims: a round trip of the clients' messages.
const aimPoll = time.Millisecond

// inAcquireFor is how long a client must have been in Acquire to be
// picked: past the instant between the judge's answer and its call.
const inAcquireFor = time.Millisecond

// aimAcquire waits until some client has been in Acquire for a moment
// and picks one at random; false when none was before until (from the
// case start) or ctx ended.
func aimAcquire(ctx context.Context, nm *Nemesis, c judge.Peer, e Env, until time.Duration) (int, bool) {
	start, _ := nm.started()
	for {
		now := time.Since(start)
		var in []int
		for p, since := range c.Acquiring() {
			if now-since >= inAcquireFor {
				in = append(in, p)
			}
		}
		if len(in) > 0 {
			slices.Sort(in)
			return in[e.Rand.IntN(len(in))], true
		}
		if now >= until || !nm.at(ctx, now+aimPoll) {
			return 0, false
		}
	}
}

// aimExtend waits until a holder says its lease's watchdog has begun an
// extension and returns it, to be stopped at once: wherever the signal
// catches the extension (before its request left, while it is in
// flight, or after it returned, which is a miss); false when none began
// before until (from the case start) or ctx ended.
func aimExtend(ctx context.Context, nm *Nemesis, c judge.Peer, until time.Duration) (int, bool) {
	start, _ := nm.started()
	wctx, cancel := context.WithDeadline(ctx, start.Add(until))
	defer cancel()
	h, err := c.AwaitExtending(wctx)
	if err != nil {
		return 0, false
	}
	return h.Process, true
}

// armSelf makes the next Pause of process arm it with s rather than stop
// it.
func (n *Nemesis) armSelf(process int, s selfStop) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.selfStops[process] = s
}

// selfStop is how a Pause arms a client process to stop itself: the
// signal that arms it, and where it stops, for the injection's proof.
type selfStop struct {
	signal syscall.Signal
	where  string
}

// The places an armed worker stops itself at.
const (
	atGrant = "in Acquire when armed; it stopped itself once Acquire returned a lease, before reporting it (where it landed, " +
		"the history says)"
	inClock = "in Acquire when signalled; it stopped itself at once, its lock's clock standing still until it was resumed (where " +
		"it landed, the history says)"
)

// A selfStopper is a client process that can be armed to stop itself
// (worker.ArmSignal, worker.ClockSignal), as a worker of this machine can.
type selfStopper interface {
	// StopSelf arms the process with sig and returns once it has stopped
	// itself, or an error when it has not within worker.ArmWindow (an arm
	// it then ignores).
	StopSelf(ctx context.Context, sig syscall.Signal) error
}

// stopSelf arms proc with s and waits until it stopped itself.
func stopSelf(ctx context.Context, proc Process, s selfStop) error {
	p, ok := proc.(selfStopper)
	if !ok {
		return fmt.Errorf("a client that stops itself (%s) needs a client process of this machine, which the nemesis can arm", s.where)
	}
	return p.StopSelf(ctx, s.signal)
}

func (l localProcess) StopSelf(_ context.Context, sig syscall.Signal) error {
	if err := l.p.Signal(sig); errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%w: %w", remote.ErrGone, err)
	} else if err != nil {
		return err
	}
	// A worker stops itself within the window from the arm's receipt or
	// ignores the arm; a second more covers the signal's delivery.
	return waitStopped(l.p.Pid, worker.ArmWindow+time.Second)
}
