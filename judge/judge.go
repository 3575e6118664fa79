// Package judge is the referee of a run: one process that every client —
// a worker process on this host or another, or a goroutine of the runner —
// reports to over the network, holding the fenced resource the clients'
// critical sections work on and recording every operation into the case's
// history, which it checks when the case ends (package history).
//
// One judge sees every client of every host, so it counts two holders of
// a key at once wherever they run. The ordering rule keeps it honest: a
// client reports a grant only after Acquire returned, and has the end of
// its section acknowledged before it calls Release, so the section the
// judge sees lies inside the real holding: message delays can hide an
// overlap of at most one round trip and can never invent one.
//
// A case goes: every host's runner Opens it (the judge waits for all the
// hosts it expects), starts its clients, which say hello and wait at the
// start barrier (Ready) until every client of every host is ready; the
// clients run their sections; each sends Done with its metrics (a client
// whose connection drops is dead: its open section ends there, its
// outcome unknown); each runner's Finish waits for every client and
// returns the checked result.
package judge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/locker"
)

// DefaultCheckTimeout bounds each linearizability check of a case: the
// check is NP-hard, and a history of dozens of clients queueing on one
// key can take it longer than the case; it then says "unknown".
const DefaultCheckTimeout = 10 * time.Second

// Options configure a Judge.
type Options struct {
	// RunID names the run; every key of its cases starts with
	// "lockbench:<RunID>:". Empty draws a random one.
	RunID string
	// Hosts is the number of runners that join each case (1 when 0): a
	// case starts once that many have opened it.
	Hosts int
	// Out is the run dir: histories are written under Out/history. Empty
	// keeps them in memory only.
	Out string
	// CheckTimeout bounds each linearizability check
	// (DefaultCheckTimeout when 0); a check that runs out says "unknown".
	CheckTimeout time.Duration
	// Finished, when set, is called once per case when it has been
	// judged, with the result of every host together (Metrics is All's):
	// a judge of its own (lockbench judge) records the joined run with it.
	Finished func(CaseSpec, *Result)
}

// Judge referees the cases of one run. It is safe for concurrent use.
type Judge struct {
	opts Options

	mu      sync.Mutex
	cases   map[string]*Case
	ln      net.Listener
	conns   map[net.Conn]bool
	serving sync.WaitGroup
}

// New returns a judge; the error names a bad option.
func New(o Options) (*Judge, error) {
	if o.RunID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.RunID = hex.EncodeToString(b)
	}
	if o.Hosts == 0 {
		o.Hosts = 1
	}
	if o.Hosts < 1 {
		return nil, locker.Invalidf("judge: %d hosts: need at least 1", o.Hosts)
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	if o.CheckTimeout < 0 {
		return nil, locker.Invalidf("judge: check timeout %v: must be positive", o.CheckTimeout)
	}
	return &Judge{opts: o, cases: map[string]*Case{}}, nil
}

// RunID is the run's id.
func (j *Judge) RunID() string { return j.opts.RunID }

// CaseSpec is what a runner tells the judge about a case it runs. Every
// host of a case must give the same ID, Guards, Duration and TimelineStep;
// Processes is the host's own number of clients.
type CaseSpec struct {
	// ID names the case within the run (e.g. "007"); keys and the history
	// file are named after it.
	ID string `json:"id"`
	// Name describes the case for messages ("redis hot/none guard=fence").
	Name string `json:"name,omitempty"`
	// Guards are the guards the resource runs side by side: one store per
	// guard, each seeing the same sections, so that one run says what
	// each guard would have accepted.
	Guards []Guard `json:"guards"`
	// Processes is the number of clients this host runs.
	Processes int `json:"processes"`
	// Duration is how long the clients run after the start barrier.
	Duration time.Duration `json:"duration"`
	// TimelineStep is the width of a timeline bucket.
	TimelineStep time.Duration `json:"timeline_step"`
	// Load and Record are the runner's own description of the case (its
	// load spec, its results record), which the judge keeps for
	// Options.Finished without reading them.
	Load   json.RawMessage `json:"load,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`
}

func (s CaseSpec) validate() error {
	var errs []error
	if s.ID == "" {
		errs = append(errs, locker.Invalidf("case: empty id"))
	}
	if len(s.Guards) == 0 {
		errs = append(errs, locker.Invalidf("case %s: no guard", s.ID))
	}
	for i, g := range s.Guards {
		if _, err := ParseGuard(string(g)); err != nil {
			errs = append(errs, err)
		} else if slices.Contains(s.Guards[:i], g) {
			errs = append(errs, locker.Invalidf("case %s: guard %s given twice", s.ID, g))
		}
	}
	if s.Processes < 1 {
		errs = append(errs, locker.Invalidf("case %s: %d processes: need at least 1", s.ID, s.Processes))
	}
	if s.Duration <= 0 {
		errs = append(errs, locker.Invalidf("case %s: duration %v: must be positive", s.ID, s.Duration))
	}
	if s.TimelineStep <= 0 {
		errs = append(errs, locker.Invalidf("case %s: timeline step %v: must be positive", s.ID, s.TimelineStep))
	}
	return errors.Join(errs...)
}

// CaseInfo is what the judge tells a host's runner about a case it opened.
type CaseInfo struct {
	RunID string `json:"run_id"`
	ID    string `json:"id"`
	// KeyPrefix starts every key of the case, on every host.
	KeyPrefix string `json:"key_prefix"`
	// FirstProcess numbers this host's first client: its clients are
	// FirstProcess to FirstProcess+Processes-1, unique across hosts.
	FirstProcess int `json:"first_process"`
}

// Open joins host to case spec.ID, creating it when host is the first,
// and waits until every expected host has joined (or ctx ends).
func (j *Judge) Open(ctx context.Context, host string, spec CaseSpec) (CaseInfo, error) {
	if err := spec.validate(); err != nil {
		return CaseInfo{}, err
	}
	c, info, err := j.open(host, spec)
	if err != nil {
		return CaseInfo{}, err
	}
	select {
	case <-c.opened:
		return info, nil
	case <-ctx.Done():
		c.Cancel(fmt.Errorf("host %s stopped waiting for the other hosts: %w", host, ctx.Err()))
		return CaseInfo{}, fmt.Errorf("case %s: waiting for %d hosts: %w", spec.ID, j.opts.Hosts, ctx.Err())
	}
}

func (j *Judge) open(host string, spec CaseSpec) (*Case, CaseInfo, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	c := j.cases[spec.ID]
	if c == nil {
		c = newCase(j, spec)
		j.cases[spec.ID] = c
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.spec; !slices.Equal(s.Guards, spec.Guards) || s.Duration != spec.Duration || s.TimelineStep != spec.TimelineStep {
		return nil, CaseInfo{}, locker.Invalidf("case %s: host %s runs guards %v for %v, the case was opened with guards %v for %v",
			spec.ID, host, spec.Guards, spec.Duration, s.Guards, s.Duration)
	}
	if _, dup := c.hosts[host]; dup {
		return nil, CaseInfo{}, locker.Invalidf("case %s: host %q joined twice (give each host its own name)", spec.ID, host)
	}
	if len(c.hosts) == j.opts.Hosts {
		return nil, CaseInfo{}, locker.Invalidf("case %s: host %q is one too many: the judge expects %d hosts", spec.ID, host, j.opts.Hosts)
	}
	h := &hostState{first: c.expected, n: spec.Processes}
	c.hosts[host] = h
	c.hostOrder = append(c.hostOrder, host)
	c.expected += spec.Processes
	if len(c.hosts) == j.opts.Hosts {
		close(c.opened)
	}
	return c, CaseInfo{RunID: j.opts.RunID, ID: spec.ID, KeyPrefix: c.keyPrefix, FirstProcess: h.first}, nil
}

// Case returns the open case id, or nil.
func (j *Judge) Case(id string) *Case {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cases[id]
}

// Finish waits until every client of case id has finished (or died) and
// returns its result as host sees it: the safety of every host's clients,
// the metrics of host's own. The checks run once, by the first Finish.
func (j *Judge) Finish(ctx context.Context, host, id string) (*Result, error) {
	c := j.Case(id)
	if c == nil {
		return nil, locker.Invalidf("case %q: not open", id)
	}
	return c.finish(ctx, host)
}

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
	// VM pause), after its read or, with BeforeRead, right after the
	// grant, before its first access. It needs a Pauser.
	Pause      time.Duration
	BeforeRead bool
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

// hostState is one host's share of a case.
type hostState struct {
	first, n int
	metrics  []Metrics
}

// proc is what the judge knows of one client.
type proc struct {
	host  string
	pid   int
	ready bool
	// lastReply is when the judge last answered it (ns since the start):
	// the client's next call began no earlier.
	lastReply int64
	active    []int64 // its open sections
	finished  bool    // done or dead
}

// sectionState is what the judge knows of one granted section.
type sectionState struct {
	key      string
	process  int
	token    uint64
	hasToken bool
	action   Action
	read     bool
	written  bool
	ended    bool
	values   map[Guard]int64 // what each store's counter read
}

// Case is one case of the run on the judge.
type Case struct {
	j         *Judge
	spec      CaseSpec
	keyPrefix string
	opened    chan struct{} // closed when every host has joined
	started   chan struct{} // closed at the start barrier (or on Cancel)
	finished  chan struct{} // closed when every client is done or dead

	mu        sync.Mutex
	hosts     map[string]*hostState
	hostOrder []string
	expected  int
	procs     map[int]*proc
	ready     int
	done      int
	start     time.Time
	stopAt    time.Time
	endAt     time.Time
	cancelErr error
	hook      SectionHook
	pauser    Pauser
	stores    map[Guard]*store
	sections  map[int64]*sectionState
	ops       []history.Op

	checkOnce sync.Once
	result    *Result
	collected int // hosts that have taken their result
}

func newCase(j *Judge, spec CaseSpec) *Case {
	c := &Case{
		j: j, spec: spec, keyPrefix: fmt.Sprintf("lockbench:%s:%s:", j.opts.RunID, spec.ID),
		opened: make(chan struct{}), started: make(chan struct{}), finished: make(chan struct{}),
		hosts: map[string]*hostState{}, procs: map[int]*proc{},
		stores: map[Guard]*store{}, sections: map[int64]*sectionState{},
	}
	for _, g := range spec.Guards {
		c.stores[g] = newStore(g)
	}
	return c
}

// SetHooks installs the section hook and the pauser that carries out its
// pauses. Call it before the clients start (an in-process runner does).
func (c *Case) SetHooks(hook SectionHook, p Pauser) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook, c.pauser = hook, p
}

// Started is closed at the start barrier, or when the case is cancelled.
func (c *Case) Started() <-chan struct{} { return c.started }

// Start is the moment the clients started (valid once Started is closed).
func (c *Case) Start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start
}

// Stop asks every client to stop after its current section: every reply
// from now on says so. A runner calls it when it is interrupted.
func (c *Case) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopAt.IsZero() {
		c.stopAt = time.Now()
	}
}

func (c *Case) stopping() bool { return !c.stopAt.IsZero() }

// Cancel ends a case that cannot run (a client that died before the
// start, a host that gave up): clients waiting at the barrier get err,
// and Finish returns once every client that started is done.
func (c *Case) Cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelLocked(err)
}

// cancelLocked is Cancel; the caller holds c.mu.
func (c *Case) cancelLocked(err error) {
	if c.cancelErr != nil {
		return
	}
	c.cancelErr = fmt.Errorf("case %s cancelled: %w", c.spec.ID, err)
	if c.start.IsZero() {
		select {
		case <-c.started:
		default:
			close(c.started)
		}
		c.closeFinished()
	}
	if c.stopAt.IsZero() {
		c.stopAt = time.Now()
	}
}

func (c *Case) closeFinished() {
	select {
	case <-c.finished:
	default:
		c.endAt = time.Now()
		close(c.finished)
	}
}

// since is now on the case's clock: ns since the start. The caller holds
// c.mu.
func (c *Case) since() int64 { return time.Since(c.start).Nanoseconds() }

// hello registers a client of host. The caller holds c.mu.
func (c *Case) hello(host string, process, pid int) error {
	h := c.hosts[host]
	switch {
	case h == nil:
		return locker.Invalidf("case %s: host %q has not opened it", c.spec.ID, host)
	case process < h.first || process >= h.first+h.n:
		return locker.Invalidf("case %s: process %d is not one of host %s's (%d to %d)", c.spec.ID, process, host, h.first, h.first+h.n-1)
	case c.procs[process] != nil:
		return locker.Invalidf("case %s: process %d said hello twice", c.spec.ID, process)
	case !c.start.IsZero():
		return locker.Invalidf("case %s: process %d arrived after the start", c.spec.ID, process)
	}
	c.procs[process] = &proc{host: host, pid: pid}
	return nil
}

// StartInfo is what a client learns at the start barrier.
type StartInfo struct {
	// Start is the judge's wall clock at the start (Unix ns).
	Start int64 `json:"start"`
	// Duration is how long the clients run.
	Duration time.Duration `json:"duration"`
}

// arrive marks process ready and returns the channel to wait on.
func (c *Case) arrive(process int) (<-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[process]
	if p == nil {
		return nil, locker.Invalidf("case %s: process %d is ready without hello", c.spec.ID, process)
	}
	if !p.ready {
		p.ready = true
		c.ready++
	}
	if c.ready == c.expected && c.start.IsZero() && c.cancelErr == nil {
		select {
		case <-c.opened:
			c.start = time.Now()
			close(c.started)
		default:
		}
	}
	return c.started, nil
}

// startInfo returns the start, or the reason there is none.
func (c *Case) startInfo() (StartInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelErr != nil && c.start.IsZero() {
		return StartInfo{}, c.cancelErr
	}
	return StartInfo{Start: c.start.UnixNano(), Duration: c.spec.Duration}, nil
}

// startWall is the start on the wall clock, Unix ns. The caller holds c.mu.
func (c *Case) startWall() int64 { return c.start.UnixNano() }

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
	s := &sectionState{key: g.Key, process: process, token: g.Token, hasToken: g.HasToken}
	c.sections[id] = s
	p.active = append(p.active, id)
	hook, pauser := c.hook, c.pauser
	c.mu.Unlock()

	if hook != nil {
		var validFor time.Duration
		if valid != history.NoExpiry {
			validFor = time.Duration(max(valid-now, 0))
		}
		s.action = hook(SectionEvent{Process: process, Section: id, Key: g.Key, Granted: time.Duration(now), ValidFor: validFor})
	}
	if s.action.Pause > 0 && s.action.BeforeRead {
		if err := pause(pauser, process, s.action.Pause); err != nil {
			return Grant{}, err
		}
	}
	return Grant{Section: id, Hold: s.action.Hold}, nil
}

func pause(p Pauser, process int, d time.Duration) error {
	if p == nil {
		return fmt.Errorf("process %d: a pause needs client processes and a pauser", process)
	}
	return p.Pause(process, d)
}

// running returns the client, or why it may not act now. The caller
// holds c.mu.
func (c *Case) running(process int) (*proc, error) {
	p := c.procs[process]
	switch {
	case p == nil:
		return nil, locker.Invalidf("case %s: unknown process %d", c.spec.ID, process)
	case c.start.IsZero():
		return nil, locker.Invalidf("case %s: process %d acts before the start", c.spec.ID, process)
	case p.finished:
		return nil, locker.Invalidf("case %s: process %d acts after it finished", c.spec.ID, process)
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
		return nil, locker.Invalidf("case %s: process %d has no open section %d", c.spec.ID, process, id)
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
	pauser := c.pauser
	c.mu.Unlock()
	if s.action.Pause > 0 && !s.action.BeforeRead {
		return pause(pauser, process, s.action.Pause)
	}
	return nil
}

// write is the section's write: each store writes the counter it read
// plus one, if its guard accepts the request.
func (c *Case) write(process int, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.section(process, id)
	if err != nil {
		return err
	}
	if s.written {
		return locker.Invalidf("case %s: section %d wrote twice", c.spec.ID, id)
	}
	if !s.read {
		return locker.Invalidf("case %s: section %d writes before it read", c.spec.ID, id)
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
	return nil
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
// grant, or of a release. Times are on its wall clock (Unix ns).
type OpReport struct {
	F       history.Func `json:"f"`
	Type    history.Type `json:"type"`
	Key     string       `json:"key"`
	Section int64        `json:"section,omitempty"`
	// Invoke and Complete bound the call on the client's clock.
	Invoke   int64  `json:"invoke"`
	Complete int64  `json:"complete"`
	Error    string `json:"error,omitempty"`
	// ThetaLo and ThetaHi bound the judge's clock minus the client's.
	ThetaLo int64 `json:"theta_lo"`
	ThetaHi int64 `json:"theta_hi"`
}

// report records an acquire that did not grant, or a release.
func (c *Case) report(process int, r OpReport) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.running(process)
	if err != nil {
		return err
	}
	switch {
	case r.F == history.Acquire && r.Type != history.OK:
	case r.F == history.Release && r.Section > 0:
		s := c.sections[r.Section]
		if s == nil || s.process != process || !s.ended {
			return locker.Invalidf("case %s: process %d releases section %d, which it has not ended", c.spec.ID, process, r.Section)
		}
	default:
		return locker.Invalidf("case %s: process %d reports a %s %s: only failed acquires and releases are reported", c.spec.ID, process, r.F, r.Type)
	}
	now := c.since()
	hi := now
	if r.Type != history.Info && r.ThetaHi != noBound {
		hi = min(now, max(r.Complete+r.ThetaHi-c.startWall(), p.lastReply))
	}
	c.record(history.Op{
		Process: process, F: r.F, Type: r.Type, Key: r.Key, Section: r.Section,
		Invoke: c.clamp(r.Invoke, r.ThetaLo, p.lastReply, now), Complete: hi,
		WorkerInvoke: r.Invoke, WorkerComplete: r.Complete, Error: r.Error,
	})
	return nil
}

// replied notes that the judge answered process now: its next call
// begins later. A client's calls are sequential.
func (c *Case) replied(process int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[process]; p != nil && !c.start.IsZero() {
		p.lastReply = c.since()
	}
}

// doneWith marks a client finished, with its metrics, or dead (metrics
// nil, why says how): an open section of a dead client ends there, its
// outcome unknown.
func (c *Case) doneWith(process int, m *Metrics, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[process]
	if p == nil || p.finished {
		return
	}
	if c.start.IsZero() {
		c.cancelLocked(fmt.Errorf("process %d ended before the start: %s", process, why))
		return
	}
	for _, id := range slices.Clone(p.active) {
		c.endSection(process, id, c.sections[id], history.Info, why)
	}
	p.finished = true
	if m != nil {
		h := c.hosts[p.host]
		h.metrics = append(h.metrics, *m)
	}
	c.done++
	if c.done == c.expected {
		c.closeFinished()
	}
}

// Gone tells the judge that client process ended without Done: its
// process died or never started. A client missing before the start
// cancels the case.
func (c *Case) Gone(process int, why string) {
	c.mu.Lock()
	p := c.procs[process]
	c.mu.Unlock()
	if p == nil {
		c.Cancel(fmt.Errorf("process %d ended before it said hello: %s", process, why))
		return
	}
	c.doneWith(process, nil, why)
}

// Result is a case's outcome as the judge saw it.
type Result struct {
	CaseInfo
	// Start is the start barrier, on the judge's wall clock.
	Start time.Time `json:"start"`
	// Elapsed is the measured duration: from the start until the clients
	// stopped (the duration, or an early stop).
	Elapsed time.Duration `json:"elapsed"`
	// Stopped is set when the case was stopped early or cancelled, with
	// why.
	Stopped string `json:"stopped,omitempty"`
	// Dead lists the clients that died, with how.
	Dead []string `json:"dead,omitempty"`
	// Reports are the overlap counter's, one per guard (the overlaps and
	// incidents are the same in each; stale writes and lost updates are
	// what each guard let through). Linearizable and LinearizableFenced
	// are porcupine's.
	Reports            map[Guard]history.Report `json:"reports"`
	Linearizable       history.Verdict          `json:"linearizable"`
	LinearizableFenced history.Verdict          `json:"linearizable_fenced"`
	// TimelineStep and Timeline count grants per step from the start.
	TimelineStep time.Duration `json:"timeline_step"`
	Timeline     []int64       `json:"timeline"`
	// History is the path of the history file relative to the judge's
	// run dir ("" when the judge keeps none).
	History string `json:"history,omitempty"`
	// Ops is the history itself; only an in-process runner gets it.
	Ops []history.Op `json:"-"`
	// Metrics merges the metrics of the asking host's clients; All, of
	// every host's.
	Metrics Metrics `json:"metrics"`
	All     Metrics `json:"all"`
	// Processes is the number of clients of every host.
	Processes int `json:"processes"`
}

func (c *Case) finish(ctx context.Context, host string) (*Result, error) {
	select {
	case <-c.finished:
	case <-ctx.Done():
		c.Stop()
		return nil, fmt.Errorf("case %s: waiting for its clients: %w", c.spec.ID, ctx.Err())
	}
	c.mu.Lock()
	h := c.hosts[host]
	cancelled := c.cancelErr != nil && c.start.IsZero()
	err := c.cancelErr
	c.mu.Unlock()
	if h == nil {
		return nil, locker.Invalidf("case %s: host %q did not open it", c.spec.ID, host)
	}
	if cancelled {
		return nil, err
	}
	c.checkOnce.Do(c.check)
	r := *c.result
	r.Metrics = mergeMetrics(h.metrics)
	r.Timeline = timeline(r.Ops, host, c.spec.TimelineStep, r.Elapsed)
	c.collect()
	return &r, nil
}

// collect forgets the case, history and all, once every host has taken
// its result: a run of hundreds of cases would otherwise hold every
// history in memory.
func (c *Case) collect() {
	c.mu.Lock()
	c.collected++
	done := c.collected == len(c.hosts)
	c.mu.Unlock()
	if done {
		c.j.mu.Lock()
		if c.j.cases[c.spec.ID] == c {
			delete(c.j.cases, c.spec.ID)
		}
		c.j.mu.Unlock()
	}
}

// check judges the history, once, and writes it out.
func (c *Case) check() {
	c.mu.Lock()
	ops := slices.Clone(c.ops)
	r := &Result{
		CaseInfo: CaseInfo{RunID: c.j.opts.RunID, ID: c.spec.ID, KeyPrefix: c.keyPrefix},
		Start:    c.start, Processes: c.expected, TimelineStep: c.spec.TimelineStep, Ops: ops,
	}
	end := c.start.Add(c.spec.Duration)
	if !c.stopAt.IsZero() && c.stopAt.Before(end) {
		end = c.stopAt
		r.Stopped = "stopped early"
		if c.cancelErr != nil {
			r.Stopped = c.cancelErr.Error()
		}
	}
	if c.endAt.Before(end) {
		end = c.endAt
	}
	r.Elapsed = end.Sub(c.start)
	var all []Metrics
	for _, name := range c.hostOrder {
		all = append(all, c.hosts[name].metrics...)
	}
	for _, o := range ops {
		if o.F == history.End && o.Type == history.Info {
			r.Dead = append(r.Dead, fmt.Sprintf("process %d at %s: %s", o.Process, time.Duration(o.Complete).Round(time.Millisecond), o.Error))
		}
	}
	c.mu.Unlock()

	r.All = mergeMetrics(all)
	r.Reports = make(map[Guard]history.Report, len(c.spec.Guards))
	for _, g := range c.spec.Guards {
		r.Reports[g] = history.Check(ops, string(g), g.Fenced())
	}
	r.Linearizable = history.Linearizable(ops, c.j.opts.CheckTimeout)
	r.LinearizableFenced = history.LinearizableFenced(ops, c.j.opts.CheckTimeout)
	r.Timeline = timeline(ops, "", c.spec.TimelineStep, r.Elapsed)
	if c.j.opts.Out != "" {
		rel := filepath.Join("history", c.spec.ID+".jsonl.gz")
		if err := history.WriteFile(filepath.Join(c.j.opts.Out, rel), ops); err != nil {
			r.Stopped = strings.TrimPrefix(r.Stopped+"; ", "; ") + "history not written: " + err.Error()
		} else {
			r.History = rel
		}
	}
	c.result = r
	if f := c.j.opts.Finished; f != nil {
		all := *r
		all.Metrics = all.All
		f(c.spec, &all)
	}
}

// timeline counts the grants of host's clients (every host's when host
// is empty) per step, covering at least elapsed.
func timeline(ops []history.Op, host string, step, elapsed time.Duration) []int64 {
	n := int((elapsed + step - 1) / step)
	t := make([]int64, n)
	for _, o := range ops {
		if o.F != history.Acquire || o.Type != history.OK || (host != "" && o.Host != host) {
			continue
		}
		i := int(time.Duration(o.Complete) / step)
		if i >= len(t) {
			t = append(t, make([]int64, i+1-len(t))...)
		}
		t[i]++
	}
	return t
}
