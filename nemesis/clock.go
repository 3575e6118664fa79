package nemesis

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// The clock faults: the wall clock of the targeted server processes jumps
// or runs fast, for real (a clock preload, the Clock capability; the
// servers of these cases only run under it). What a server does with its wall clock is its
// own business — Redis expires keys by it, PostgreSQL's now() is it, a
// ZooKeeper leader stamps znodes with it and times sessions on its
// monotonic clock — and is what the cases measure. The effect is read
// back from the servers: their own clocks (Clock.ServerTime), and
// the held key's remaining life on each.

var clockJump = &Scenario{
	Name: "clock-jump",
	span: instantly,
	Doc: "the wall clock of a random minority or majority of the nodes (the leader first, where there is one) jumps forward (or " +
		"back) by a number of key lifetimes, for real, while a holder is inside its section",
	Params: map[string]string{"by": "the jump in key lifetimes: the TTL, or longer where the backend keeps its keys longer (default 1)",
		"nodes": "minority or majority (default)", "back": "1 jumps the clock back instead of forward"},
	MinTTL:   2 * time.Second,
	Needs:    Needs{FakeClock: true},
	Requires: Servers | MovableClock,
	check: func(v url.Values) error {
		if b := v.Get("back"); b != "" && b != "0" && b != "1" {
			return fmt.Errorf("back=%q: want 1 (back) or 0 (forward)", b)
		}
		return checkClock("by")(v)
	},
	plan: func(e Env) plan {
		// The jump is sized from how long the keys live on the servers,
		// not from the lease the holder is promised: a lock that keeps
		// its keys longer than its leases (rueidislock) must not be
		// spared by a jump its keys outlive.
		by := time.Duration(float(e.Params, "by", 1) * float64(max(e.KeyLife, e.Spec.TTL)))
		way, sign := "forward", "+"
		if e.Params.Get("back") == "1" {
			by, way, sign = -by, "back", "−"
		}
		pick, which := e.clockTargets()
		return e.drive(strike{
			label: fmt.Sprintf("clock jumped %s%v (%s)", sign, by.Abs(), which), hold: e.Spec.TTL * 3 / 4, exclusion: true, pick: pick,
			do: e.keysAcross(func(ctx context.Context, a attempt) (string, error) {
				before, err := offsets(ctx, a.nodes)
				if err != nil {
					return "", fmt.Errorf("reading the servers' clocks before the jump: %w", err)
				}
				err = eachCap(a.nodes, MovableClock, func(c Clock) error { return c.JumpClock(by) })
				a.struck()
				if err != nil {
					return "", err
				}
				after, err := offsets(ctx, a.nodes)
				if err != nil {
					return "", fmt.Errorf("reading the servers' clocks after the jump: %w", err)
				}
				var out []string
				for i, n := range a.nodes {
					moved := after[i] - before[i]
					// A clock read costs a round trip, and ZooKeeper's is
					// stamped in ms: a jump is seen within 250 ms of its size.
					if d := moved - by; d < -250*time.Millisecond || d > 250*time.Millisecond {
						return "", fmt.Errorf("%s's server clock moved %v, not the %v it was jumped", n, moved.Round(time.Millisecond), by)
					}
					out = append(out, fmt.Sprintf("%s's server clock moved %v %s", n, moved.Abs().Round(time.Millisecond), way))
				}
				return strings.Join(out, "; "), nil
			}),
		})
	},
}

var clockRate = &Scenario{
	Name: "clock-rate",
	span: lasting,
	Doc: "the wall clock of a random minority or majority of the nodes (the leader first, where there is one) runs fast, rate times real " +
		"time, for a lease (at least a second), while a holder is inside its section; then at real speed again",
	Params: map[string]string{"rate": "how fast the clock runs, in real seconds per second (default 2)",
		"nodes": "minority or majority (default)"},
	Note: "clock-rate scales the servers' wall clock only: a lock whose server times its leases on a monotonic clock (ZooKeeper's " +
		"sessions) is not reached, " +
		"so its dependence on a clock's rate could not be measured here",
	MinTTL:   2 * time.Second,
	Needs:    Needs{FakeClock: true},
	Requires: Servers | MovableClock,
	check:    checkClock("rate"),
	plan: func(e Env) plan {
		rate := float(e.Params, "rate", 2)
		pick, which := e.clockTargets()
		return e.drive(strike{
			label: fmt.Sprintf("clock ran at %g× (%s)", rate, which), lasts: e.window(), hold: e.Spec.TTL * 3 / 4, exclusion: true, pick: pick,
			do: func(ctx context.Context, a attempt) (string, error) {
				a.struck()
				if err := eachCap(a.nodes, MovableClock, func(c Clock) error { return c.SetClockRate(rate) }); err != nil {
					return "", err
				}
				// The rate as the servers read it: their clocks over a
				// stretch of the window, each read bracketed by this
				// host's clock, so that a slow round trip widens the
				// interval the rate is known to lie in rather than skew it.
				r0, err := serverTimes(ctx, a.nodes)
				if err != nil {
					return "", fmt.Errorf("reading the servers' clocks: %w", err)
				}
				sleepUntil(ctx, time.Now().Add(e.window()/2))
				r1, err := serverTimes(context.WithoutCancel(ctx), a.nodes)
				if err != nil {
					return "", fmt.Errorf("reading the servers' clocks: %w", err)
				}
				var out []string
				for i, n := range a.nodes {
					moved := float64(r1[i].server.Sub(r0[i].server))
					lo, hi := moved/float64(r1[i].after.Sub(r0[i].before)), math.Inf(1)
					if d := r1[i].before.Sub(r0[i].after); d > 0 {
						hi = moved / float64(d)
					}
					if hi < 0.85*rate || lo > 1.15*rate {
						return "", fmt.Errorf("%s's server clock ran at %.2f–%.2f× real time, not %g×", n, lo, hi, rate)
					}
					out = append(out, fmt.Sprintf("%s's server clock ran at %.2f–%.2f× real time", n, lo, hi))
				}
				return strings.Join(out, "; "), nil
			},
			undo: func(_ context.Context, nodes []Node) error {
				return eachCap(nodes, MovableClock, func(c Clock) error { return c.SetClockRate(1) })
			},
		})
	},
}

func checkClock(size string) func(url.Values) error {
	return func(v url.Values) error {
		if n := v.Get("nodes"); n != "" && n != "minority" && n != "majority" {
			return fmt.Errorf("nodes=%q: want minority or majority", n)
		}
		return checkFloat(v, size)
	}
}

// clockTargets draws the nodes of a clock fault as its nodes param says:
// a minority or a majority, the leader first where there is one (a
// ZooKeeper ensemble reads only its leader's wall clock, to stamp
// znodes).
func (e Env) clockTargets() (func(context.Context, int) ([]Node, error), string) {
	k, which := len(e.Target.Nodes)/2+1, "majority"
	if e.Params.Get("nodes") == "minority" {
		k, which = max((len(e.Target.Nodes)-1)/2, 1), "minority"
	}
	return func(ctx context.Context, _ int) ([]Node, error) {
		l, err := e.Target.leader(ctx)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return e.pick(e.Target.Nodes, k), nil
		}
		var others []Node
		for _, n := range e.Target.Nodes {
			if n != l {
				others = append(others, n)
			}
		}
		return append([]Node{l}, e.pick(others, k-1)...), nil
	}, which
}

// offsets reads how far each server's clock is ahead of this host's.
func offsets(ctx context.Context, nodes []Node) ([]time.Duration, error) {
	out := make([]time.Duration, len(nodes))
	err := eachIndexed(nodes, func(i int, n Node) error {
		c, ok := n.(Clock)
		if !ok {
			return fmt.Errorf("%s lacks the capability %v", n, MovableClock)
		}
		from := time.Now()
		t, err := c.ServerTime(ctx)
		if err != nil {
			return err
		}
		out[i] = t.Sub(from.Add(time.Since(from) / 2))
		return nil
	})
	return out, err
}

// serverRead is one read of a server's clock, between two readings of
// this host's.
type serverRead struct {
	before, server, after time.Time
}

// serverTimes reads each server's clock, at once.
func serverTimes(ctx context.Context, nodes []Node) ([]serverRead, error) {
	out := make([]serverRead, len(nodes))
	err := eachIndexed(nodes, func(i int, n Node) error {
		c, ok := n.(Clock)
		if !ok {
			return fmt.Errorf("%s lacks the capability %v", n, MovableClock)
		}
		out[i].before = time.Now()
		t, err := c.ServerTime(ctx)
		out[i].server, out[i].after = t, time.Now()
		return err
	})
	return out, err
}
