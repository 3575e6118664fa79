package judge

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

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
	// Record is what the runner's results say of the case before it is
	// measured: what ran (backend, fault, trial, seed) and the load's
	// settings (workloads.Spec.Describe). The judge does not read it; it
	// hands it to Options.Finished, so that a judge of its own can record
	// the joined case as the runners record theirs.
	Record *results.Case `json:"record,omitempty"`
	// Contract, when set, is the backend's declared promise for the
	// case's grants (its descriptor's, for the case's TTL and params): the
	// reports draw the contract line with it, not with the promise each
	// worker reports, and count the reports that differ
	// (Result.Departures).
	Contract *history.Contract `json:"contract,omitempty"`
}

func (s CaseSpec) validate() error {
	var errs []error
	if s.ID == "" {
		errs = append(errs, protocolf("case: empty id"))
	}
	if len(s.Guards) == 0 {
		errs = append(errs, protocolf("case %s: no guard", s.ID))
	}
	for i, g := range s.Guards {
		if _, err := ParseGuard(string(g)); err != nil {
			errs = append(errs, fmt.Errorf("%w: case %s: %w", ErrProtocol, s.ID, err))
		} else if slices.Contains(s.Guards[:i], g) {
			errs = append(errs, protocolf("case %s: guard %s given twice", s.ID, g))
		}
	}
	if s.Processes < 1 {
		errs = append(errs, protocolf("case %s: %d processes: need at least 1", s.ID, s.Processes))
	}
	if s.Duration <= 0 {
		errs = append(errs, protocolf("case %s: duration %v: must be positive", s.ID, s.Duration))
	}
	if s.TimelineStep <= 0 {
		errs = append(errs, protocolf("case %s: timeline step %v: must be positive", s.ID, s.TimelineStep))
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
	// acquiring is when the client went into Acquire, by the judge's
	// account (ns since the start; 0 from the start barrier), or
	// notAcquiring while it holds (live.go).
	acquiring int64
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
	// enough is set when the case was ended by Enough: stopAt is then
	// its planned end, not an interruption.
	enough bool
	endAt  time.Time
	// lastGrant is when the last grant was heard of (ns since the start).
	lastGrant int64
	cancelErr error
	hook      SectionHook
	// injections are what the case's nemesis did (Peer.Injected).
	injections *Injections
	pauser     Pauser
	stores     map[Guard]*store
	sections   map[int64]*sectionState
	ops        []history.Op
	// extendingNow is closed, and replaced, when a holder says an
	// extension has begun: lastExtending is its section (live.go).
	extendingNow  chan struct{}
	lastExtending Held

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
		return protocolf("case %s: host %q has not opened it", c.spec.ID, host)
	case process < h.first || process >= h.first+h.n:
		return protocolf("case %s: process %d is not one of host %s's (%d to %d)", c.spec.ID, process, host, h.first, h.first+h.n-1)
	case c.procs[process] != nil:
		return protocolf("case %s: process %d said hello twice", c.spec.ID, process)
	case !c.start.IsZero():
		return protocolf("case %s: process %d arrived after the start", c.spec.ID, process)
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
		return nil, protocolf("case %s: process %d is ready without hello", c.spec.ID, process)
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
