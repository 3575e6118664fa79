package judge

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lockbench/lockbench/history"
)

// SectionEvent describes a grant to a SectionHook.
type SectionEvent struct {
	Process int
	Section int64
	Key     string
	// Granted is when the judge heard of the grant, since the case start.
	Granted time.Duration
	// ValidFor is how long the lease had left then, by the holder's
	// account (0 when it promised no end).
	ValidFor time.Duration
}

// Action is a SectionHook's answer: what happens to a section.
type Action struct {
	// Hold, when positive, replaces the section's hold time: a long
	// critical section, during which the holder's process runs on.
	Hold time.Duration
	// Pause, when positive, stops the holder's whole process for that
	// long (its timers, heartbeats and keep-alives freeze, as in a GC or
	// VM pause) at At: in the judge's answer to the grant
	// (history.PointBeforeRead: before its first access), to the read
	// (history.PointAfterRead, the default: before its hold and write) or
	// to the write (history.PointAfterWrite: before it ends the section
	// and releases). The client waits for that answer whatever happens,
	// so the pause lands exactly there and costs it no time it would not
	// have spent. It needs a Pauser, and is recorded in the history.
	Pause time.Duration
	At    history.Point
}

// at returns where a's pause lands: its At, after-read by default.
func (a Action) at() history.Point {
	if a.At == "" {
		return history.PointAfterRead
	}
	return a.At
}

// SectionHook decides, for every grant, whether the section holds long or
// its holder pauses. It is called from the judge's connection goroutines,
// concurrently; it must be cheap.
type SectionHook func(SectionEvent) Action

// Pauser stops a client process for d: it must have stopped the process
// when Pause returns (SIGSTOP), and resume it d later (SIGCONT).
type Pauser interface {
	Pause(process int, d time.Duration) error
}

// sectionState is what the judge knows of one granted section.
type sectionState struct {
	key      string
	process  int
	token    uint64
	hasToken bool
	action   Action
	// granted is when the judge heard of the grant, invoke the earliest
	// its Acquire was called (ns since the start).
	granted, invoke int64
	// returned is the earliest its Acquire, extended the earliest its
	// last extension reported returned, extending when the holder last
	// said one began (ns since the start; 0: none).
	returned, extended, extending int64
	read                          bool
	written                       bool
	ended                         bool
	values                        map[Guard]int64 // what each store's counter read
}

// record appends an op, numbering it. The caller holds c.mu.
func (c *Case) record(o history.Op) {
	o.Index = len(c.ops)
	if p := c.procs[o.Process]; p != nil {
		o.Host = p.host
	}
	c.ops = append(c.ops, o)
}

// clamp maps a client's wall-clock time w to the case clock with the
// offset bound theta (judge − client, ns), at least lo and at most hi.
// The caller holds c.mu.
func (c *Case) clamp(w, theta, lo, hi int64) int64 {
	if w == 0 || theta == noBound {
		return min(max(lo, 0), hi)
	}
	return min(max(w+theta-c.startWall(), lo), hi)
}

// noBound marks a clock-offset bound not known yet.
const noBound = math.MinInt64

// GrantReport is what a client tells the judge when Acquire returned a
// lease. Times are on the client's wall clock (Unix ns).
type GrantReport struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token,omitempty"`
	HasToken bool   `json:"has_token,omitempty"`
	// ValidUntil is the lease's ValidUntil (0 when it promised no end).
	ValidUntil int64 `json:"valid_until,omitempty"`
	// Promise is the backend's contract for the grant (ns after the call
	// of Acquire; locker.Info.Promise of the TTL asked): history.Op.Promise.
	Promise int64 `json:"promise,omitempty"`
	// MaxValidity is the longest the lock can keep the key from the grant
	// (locker.Info.MaxValidity of the TTL asked): history.Op.MaxValidity.
	MaxValidity int64 `json:"max_validity,omitempty"`
	// Invoke and Complete bound the Acquire call.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// ThetaLo and ThetaHi bound the judge's clock minus the client's (ns),
	// from the round trips so far (see Client); noBound when unknown.
	ThetaLo int64 `json:"theta_lo"`
	ThetaHi int64 `json:"theta_hi"`
}

// Grant is the judge's answer to a grant.
type Grant struct {
	// Section numbers the section within the case.
	Section int64 `json:"section"`
	// Hold, when positive, replaces the section's hold time.
	Hold time.Duration `json:"hold,omitempty"`
}

// grant records a grant and opens its section.
func (c *Case) grant(process int, g GrantReport) (Grant, error) {
	c.mu.Lock()
	p, err := c.running(process)
	if err != nil {
		c.mu.Unlock()
		return Grant{}, err
	}
	now := c.since()
	id := int64(len(c.sections) + 1)
	valid := int64(history.NoExpiry)
	if g.ValidUntil != 0 && g.ThetaLo != noBound {
		valid = g.ValidUntil + g.ThetaLo - c.startWall()
	}
	c.record(history.Op{
		Process: process, F: history.Acquire, Type: history.OK, Key: g.Key, Section: id,
		Invoke: c.clamp(g.Invoke, g.ThetaLo, p.lastReply, now), Complete: now,
		WorkerInvoke: g.Invoke, WorkerComplete: g.Complete,
		Token: g.Token, HasToken: g.HasToken, ValidUntil: valid, WorkerValidUntil: g.ValidUntil, Promise: g.Promise, MaxValidity: g.MaxValidity,
	})
	op := &c.ops[len(c.ops)-1]
	if g.ThetaHi != noBound && g.Complete != 0 {
		// The latest the Acquire returned, by the client's clock: a
		// holder stopped before it reported is ordered by it.
		op.Returned = min(now, max(g.Complete+g.ThetaHi-c.startWall(), op.Invoke))
	}
	s := &sectionState{key: g.Key, process: process, token: g.Token, hasToken: g.HasToken, granted: now, invoke: op.Invoke,
		returned: min(op.Invoke+max(g.Complete-g.Invoke, 0), now)}
	c.sections[id] = s
	c.lastGrant = now
	p.active = append(p.active, id)
	p.acquiring = notAcquiring
	hook := c.hook
	c.mu.Unlock()

	if hook != nil {
		var validFor time.Duration
		if valid != history.NoExpiry {
			validFor = time.Duration(max(valid-now, 0))
		}
		s.action = hook(SectionEvent{Process: process, Section: id, Key: g.Key, Granted: time.Duration(now), ValidFor: validFor})
	}
	if err := c.pauseIn(s, id, history.PointBeforeRead); err != nil {
		return Grant{}, err
	}
	return Grant{Section: id, Hold: s.action.Hold}, nil
}

// pauseIn carries out the pause s's action asks for at point at, if any:
// the judge is answering the holder's step there.
func (c *Case) pauseIn(s *sectionState, id int64, at history.Point) error {
	if s.action.Pause <= 0 || s.action.at() != at {
		return nil
	}
	return c.pause(s.process, s.action.Pause, at, id, s.key)
}

// pause stops process for d through the pauser and records it in the
// history: aimed at point at, in section id (0 when the judge is not
// answering a step of a section). It returns once the process is
// stopped.
func (c *Case) pause(process int, d time.Duration, at history.Point, id int64, key string) error {
	c.mu.Lock()
	p, from := c.pauser, c.since()
	c.mu.Unlock()
	err := error(nil)
	typ := history.OK
	if p == nil {
		err, typ = fmt.Errorf("process %d: a pause needs client processes and a pauser", process), history.Fail
	} else if err = p.Pause(process, d); err != nil {
		typ = history.Info // it may have stopped
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := history.Op{Process: process, F: history.Pause, Type: typ, Key: key, Section: id,
		Invoke: from, Complete: c.since(), Point: at, Length: int64(d)}
	if err != nil {
		o.Error = err.Error()
	}
	c.record(o)
	return err
}

// running returns the client, or why it may not act now. The caller
// holds c.mu.
func (c *Case) running(process int) (*proc, error) {
	p := c.procs[process]
	switch {
	case p == nil:
		return nil, protocolf("case %s: unknown process %d", c.spec.ID, process)
	case c.start.IsZero():
		return nil, protocolf("case %s: process %d acts before the start", c.spec.ID, process)
	case p.finished:
		return nil, protocolf("case %s: process %d acts after it finished", c.spec.ID, process)
	}
	return p, nil
}

// section returns process's open section id. The caller holds c.mu.
func (c *Case) section(process int, id int64) (*sectionState, error) {
	if _, err := c.running(process); err != nil {
		return nil, err
	}
	s := c.sections[id]
	if s == nil || s.process != process || s.ended {
		return nil, protocolf("case %s: process %d has no open section %d", c.spec.ID, process, id)
	}
	return s, nil
}

// read is the section's first access: each store reads its counter (and
// learns the token or marks the key, as its guard does). Later calls do
// nothing.
func (c *Case) read(process int, id int64) error {
	c.mu.Lock()
	s, err := c.section(process, id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if !s.read {
		s.read = true
		s.values = make(map[Guard]int64, len(c.stores))
		now := c.since()
		for _, g := range c.spec.Guards {
			v := c.stores[g].read(s.key, id, s.token, s.hasToken)
			s.values[g] = v
			c.record(history.Op{Process: process, F: history.Read, Type: history.OK, Key: s.key, Section: id, Guard: string(g),
				Invoke: now, Complete: now, Token: s.token, HasToken: s.hasToken, Value: v})
		}
	}
	c.mu.Unlock()
	return c.pauseIn(s, id, history.PointAfterRead)
}

// write is the section's write: each store writes the counter it read
// plus one, if its guard accepts the request.
func (c *Case) write(process int, id int64) error {
	s, err := c.writeLocked(process, id)
	if err != nil {
		return err
	}
	return c.pauseIn(s, id, history.PointAfterWrite)
}

// writeLocked is write but for its pause, under c.mu.
func (c *Case) writeLocked(process int, id int64) (*sectionState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.section(process, id)
	if err != nil {
		return nil, err
	}
	if s.written {
		return nil, protocolf("case %s: section %d wrote twice", c.spec.ID, id)
	}
	if !s.read {
		return nil, protocolf("case %s: section %d writes before it read", c.spec.ID, id)
	}
	s.written = true
	now := c.since()
	for _, g := range c.spec.Guards {
		v := s.values[g] + 1
		typ := history.OK
		if !c.stores[g].write(s.key, id, s.token, s.hasToken, v) {
			typ = history.Fail
		}
		c.record(history.Op{Process: process, F: history.Write, Type: typ, Key: s.key, Section: id, Guard: string(g),
			Invoke: now, Complete: now, Token: s.token, HasToken: s.hasToken, Value: v})
	}
	return s, nil
}

// end closes the section: the holder is done with the resource.
func (c *Case) end(process int, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.section(process, id)
	if err != nil {
		return err
	}
	c.endSection(process, id, s, history.OK, "")
	return nil
}

// endSection records the end of a section. The caller holds c.mu.
func (c *Case) endSection(process int, id int64, s *sectionState, typ history.Type, why string) {
	s.ended = true
	now := c.since()
	c.record(history.Op{Process: process, F: history.End, Type: typ, Key: s.key, Section: id,
		Invoke: now, Complete: now, Token: s.token, HasToken: s.hasToken, Error: why})
	if p := c.procs[process]; p != nil {
		p.active = slices.DeleteFunc(p.active, func(x int64) bool { return x == id })
	}
}

// OpReport is what a client tells the judge of an acquire that did not
// grant, of a release, of its lease ending inside an open section
// (history.LeaseEnd), or of an extension of a section's lease
// (history.Extend). Times are on its wall clock (Unix ns).
type OpReport struct {
	F       history.Func `json:"f"`
	Type    history.Type `json:"type"`
	Key     string       `json:"key"`
	Section int64        `json:"section,omitempty"`
	// Invoke and Complete bound the call on the client's clock.
	Invoke   int64  `json:"invoke"`
	Complete int64  `json:"complete"`
	Error    string `json:"error,omitempty"`
	// ValidUntil, Promise and MaxValidity are, for an extension, the
	// lease's new deadline (0 when it failed) and the contract of the TTL
	// asked, as in a GrantReport.
	ValidUntil  int64 `json:"valid_until,omitempty"`
	Promise     int64 `json:"promise,omitempty"`
	MaxValidity int64 `json:"max_validity,omitempty"`
	// ThetaLo and ThetaHi bound the judge's clock minus the client's.
	ThetaLo int64 `json:"theta_lo"`
	ThetaHi int64 `json:"theta_hi"`
}

// report records an acquire that did not grant, a release, a lease
// that ended inside its open section, or an extension of a section's
// lease.
func (c *Case) report(process int, r OpReport) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.running(process)
	if err != nil {
		return err
	}
	// The call began after the judge's last answer to the client, whose
	// calls are sequential; an extension runs beside them (the lease's
	// watchdog), after its grant's Acquire was called.
	lo := p.lastReply
	var ext *sectionState // the section an extension is of
	switch {
	case r.F == history.Acquire && r.Type != history.OK:
	case r.F == history.Release && r.Section > 0:
		s := c.sections[r.Section]
		if s == nil || s.process != process || !s.ended {
			return protocolf("case %s: process %d releases section %d, which it has not ended", c.spec.ID, process, r.Section)
		}
	case r.F == history.LeaseEnd && r.Section > 0:
		if _, err := c.section(process, r.Section); err != nil {
			return err
		}
	case r.F == history.Extend && r.Section > 0:
		ext = c.sections[r.Section]
		if ext == nil || ext.process != process {
			return protocolf("case %s: process %d reports an extension of section %d, which is not its own", c.spec.ID, process, r.Section)
		}
		lo = ext.invoke
	default:
		return protocolf("case %s: process %d reports a %s %s: only failed acquires, releases, lease ends and extensions are "+
			"reported", c.spec.ID, process, r.F, r.Type)
	}
	now := c.since()
	hi := now
	if r.Type != history.Info && r.ThetaHi != noBound {
		hi = min(now, max(r.Complete+r.ThetaHi-c.startWall(), lo))
	}
	o := history.Op{
		Process: process, F: r.F, Type: r.Type, Key: r.Key, Section: r.Section,
		Invoke: c.clamp(r.Invoke, r.ThetaLo, lo, now), Complete: hi,
		WorkerInvoke: r.Invoke, WorkerComplete: r.Complete, Error: r.Error,
	}
	if r.F == history.Extend {
		o.Promise, o.MaxValidity, o.WorkerValidUntil = r.Promise, r.MaxValidity, r.ValidUntil
		if r.ValidUntil != 0 && r.ThetaLo != noBound {
			o.ValidUntil = r.ValidUntil + r.ThetaLo - c.startWall()
		}
	}
	c.record(o)
	if ext != nil && r.Type == history.OK {
		// It returned no earlier than its call's least start plus its
		// length on its client's clock.
		ext.extended = max(ext.extended, o.Invoke+max(r.Complete-r.Invoke, 0))
	}
	if r.F == history.Release || r.F == history.Acquire {
		p.acquiring = now // it calls Acquire next
	}
	return nil
}
