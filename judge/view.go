package judge

import (
	"slices"
	"time"
)

// Live is the judge's view of a case while it runs: what a nemesis must
// know to tell whether a fault it is about to inject meets what it is
// meant to test (a section open on the faulted key, a lock that is
// granting) rather than an idle or unavailable lock.
type Live struct {
	// Grants counts the grants so far.
	Grants int64
	// LastGrant is when the judge heard of the last grant, since the start
	// (valid when Grants > 0).
	LastGrant time.Duration
	// Open are the sections open now, oldest first.
	Open []OpenSection
}

// OpenSection is a section granted and not yet ended.
type OpenSection struct {
	Section int64
	Process int
	Key     string
	// Granted is when the judge heard of its grant, since the start.
	Granted time.Duration
}

// Live returns the case's live view now. Before the start barrier it is
// empty.
func (c *Case) Live() Live {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := Live{Grants: int64(len(c.sections)), LastGrant: time.Duration(c.lastGrant)}
	for id, s := range c.sections {
		if !s.ended {
			l.Open = append(l.Open, OpenSection{Section: id, Process: s.process, Key: s.key, Granted: time.Duration(s.granted)})
		}
	}
	slices.SortFunc(l.Open, func(a, b OpenSection) int { return int(a.Section - b.Section) })
	return l
}

// Since is how long ago d (a time since the case start, as Live gives
// them) was, on the case's clock.
func (c *Case) Since(d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() {
		return 0
	}
	return time.Duration(c.since()) - d
}

// KeyPrefix starts every key of the case: what a nemesis looks for on
// the servers to tell what a fault did to the case's keys.
func (c *Case) KeyPrefix() string { return c.keyPrefix }

// Enough ends the case before its duration because it has measured what
// it ran for (a nemesis that has its tested injections): as with Stop,
// every client stops after its current section, but the result does not
// read "stopped early" — the duration was an upper bound, not a promise.
func (c *Case) Enough() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopAt.IsZero() {
		c.stopAt = time.Now()
		c.enough = true
	}
}
