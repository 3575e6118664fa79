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
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
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
	// a judge of its own (lockbench judge) records the joined run with
	// it. Its error says the case could not be recorded: every host's
	// result carries it (Result.Unrecorded).
	Finished func(CaseSpec, *Result) error
}

// Judge referees the cases of one run. It is safe for concurrent use.
type Judge struct {
	opts Options

	// closing ends when the judge is closed (cause ErrClosed): every
	// wait of the judge's watches it.
	closing context.Context
	shut    context.CancelCauseFunc

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
		return nil, configf("judge: %d hosts: need at least 1", o.Hosts)
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	if o.CheckTimeout < 0 {
		return nil, configf("judge: check timeout %v: must be positive", o.CheckTimeout)
	}
	j := &Judge{opts: o, cases: map[string]*Case{}}
	j.closing, j.shut = context.WithCancelCause(context.Background())
	return j, nil
}

// bind returns ctx, ended also when the judge closes: a wait of the
// judge's ends with whichever comes first. Call stop when done.
func (j *Judge) bind(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(j.closing, func() { cancel(context.Cause(j.closing)) })
	return ctx, func() { unwatch(); cancel(nil) }
}

// RunID is the run's id.
func (j *Judge) RunID() string { return j.opts.RunID }

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
	ctx, stop := j.bind(ctx)
	defer stop()
	select {
	case <-c.opened:
		return info, nil
	case <-ctx.Done():
		err := ended(ctx)
		c.Cancel(fmt.Errorf("host %s stopped waiting for the other hosts: %w", host, err))
		return CaseInfo{}, fmt.Errorf("case %s: waiting for %d hosts: %w", spec.ID, j.opts.Hosts, err)
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
		return nil, CaseInfo{}, protocolf("case %s: host %s runs guards %v for %v, the case was opened with guards %v for %v",
			spec.ID, host, spec.Guards, spec.Duration, s.Guards, s.Duration)
	}
	if _, dup := c.hosts[host]; dup {
		return nil, CaseInfo{}, protocolf("case %s: host %q joined twice (give each host its own name)", spec.ID, host)
	}
	if len(c.hosts) == j.opts.Hosts {
		return nil, CaseInfo{}, protocolf("case %s: host %q is one too many: the judge expects %d hosts", spec.ID, host, j.opts.Hosts)
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
		return nil, protocolf("case %q: not open", id)
	}
	return c.finish(ctx, host)
}
