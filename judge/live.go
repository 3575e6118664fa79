package judge

import (
	"context"
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
	// Granted is when the judge heard of the grant, since the case start;
	// Returned the earliest the holder's Acquire returned, Extended the
	// earliest its last extension reported returned (0: none yet), and
	// Extending when the holder last said one began (0: none yet).
	Granted, Returned, Extended, Extending time.Duration
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
			out = append(out, s.held(id))
		}
	}
	slices.SortFunc(out, func(a, b Held) int { return int(a.Section - b.Section) })
	return out
}

// held is s as a Held.
func (s *sectionState) held(id int64) Held {
	return Held{Process: s.process, Section: id, Key: s.key, Granted: time.Duration(s.granted), Returned: time.Duration(s.returned),
		Extended: time.Duration(s.extended), Extending: time.Duration(s.extending)}
}

// extending notes that an extension of section's lease has begun, and
// wakes whoever awaits one.
func (c *Case) extending(process int, section int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.running(process); err != nil {
		return err
	}
	s := c.sections[section]
	if s == nil || s.process != process {
		return protocolf("case %s: process %d extends section %d, which is not its own", c.spec.ID, process, section)
	}
	s.extending = c.since()
	c.lastExtending = s.held(section)
	if c.extendingNow != nil {
		close(c.extendingNow)
		c.extendingNow = nil
	}
	return nil
}

// AwaitExtending waits until a holder says an extension of its lease has
// begun, and returns its section; ctx bounds the wait. The extension may
// have returned already: where a pause aimed at it lands, the history
// says.
func (c *Case) AwaitExtending(ctx context.Context) (Held, error) {
	c.mu.Lock()
	if c.extendingNow == nil {
		c.extendingNow = make(chan struct{})
	}
	ch := c.extendingNow
	c.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return Held{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastExtending, nil
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
