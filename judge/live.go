package judge

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockbench/lockbench/history"
)

// The judge's live view of its clients, for a nemesis that aims a pause
// at a moment of a client's cycle the judge cannot make itself: inside
// Acquire, inside an Extend. It is what the clients' messages tell, so
// it lags them by a round trip at most; where a pause really lands, the
// history says (history.Landings).

// notAcquiring is proc.acquiring while the client holds.
const notAcquiring = -1

// Held is an open section, as the judge sees it.
type Held struct {
	Process int
	Section int64
	Key     string
	// Granted is when the judge heard of the grant, since the case start:
	// the holder's Acquire had returned just before.
	Granted time.Duration
}

// Acquiring returns the clients that are in Acquire by the judge's
// account — it let them through the start barrier, or answered their
// release or their acquire that did not grant, and has had no grant from
// them since — each with when that began (since the case start). Under
// a think time a client may still be thinking.
func (c *Case) Acquiring() map[int]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]time.Duration{}
	if c.start.IsZero() {
		return out
	}
	for n, p := range c.procs {
		if !p.finished && p.acquiring != notAcquiring {
			out[n] = time.Duration(p.acquiring)
		}
	}
	return out
}

// Holding returns the open sections, in the order they were granted.
func (c *Case) Holding() []Held {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Held
	for id, s := range c.sections {
		if !s.ended {
			out = append(out, Held{Process: s.process, Section: id, Key: s.key, Granted: time.Duration(s.granted)})
		}
	}
	slices.SortFunc(out, func(a, b Held) int { return int(a.Section - b.Section) })
	return out
}

// Extensions returns how many extensions of the case's leases their
// holders have reported, and how long they took on average on their
// clients' clocks (0 without any).
func (c *Case) Extensions() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.extensions == 0 {
		return 0, 0
	}
	return int(c.extensions), time.Duration(c.extensionNS / c.extensions)
}

// extensionTook counts an extension reported. The caller holds c.mu.
func (c *Case) extensionTook(r OpReport) {
	if d := r.Complete - r.Invoke; r.Invoke != 0 && d >= 0 {
		c.extensions++
		c.extensionNS += d
	}
}

// Pause stops client process for d now, through the case's pauser,
// aimed at point at of its cycle — one the judge does not answer in,
// inside Acquire or inside an Extend, which a nemesis aims at with the
// live view — and records it in the history, where history.Landings
// locates it. It returns once the process is stopped.
func (c *Case) Pause(process int, d time.Duration, at history.Point) error {
	c.mu.Lock()
	_, err := c.running(process)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("pause process %d for %v: must be positive", process, d)
	}
	return c.pause(process, d, at, 0, "")
}
