package judge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

// Peer is a case as its nemesis sees it: the judge's peer, which the
// judge asks about every grant (SetHooks) and which reads the judge's live
// view to aim its faults and prove their preconditions. A *Case is the
// peer of a nemesis in the judge's process; a *RemotePeer carries the same
// calls over the wire to a judge on another host (lockbench judge), so
// that one nemesis works against either.
type Peer interface {
	// SetHooks installs the section hook and the pauser that carries out
	// its pauses. Call it before the clients start.
	SetHooks(hook SectionHook, p Pauser)
	// Started is closed at the start barrier, or when the case is
	// cancelled (Start is then zero).
	Started() <-chan struct{}
	// Start is the moment the clients started, on this process's clock.
	Start() time.Time
	// Enough ends the case before its duration: it has what it ran for.
	Enough()
	// Live is the judge's live view of the case now.
	Live() Live
	// KeyPrefix starts every key of the case.
	KeyPrefix() string
	// Acquiring returns the clients in Acquire now, with since when.
	Acquiring() map[int]time.Duration
	// AwaitExtending waits until a holder says an extension has begun.
	AwaitExtending(ctx context.Context) (Held, error)
	// Pause stops a client for d now, aimed at point at of its cycle,
	// through the pauser, and records it in the history.
	Pause(process int, d time.Duration, at history.Point) error
	// Injected records what the nemesis did in the case: the judge's
	// result carries it (Result.Injections), so a judge that records the
	// run itself (lockbench judge) records the injections too.
	Injected(Injections) error
}

var _ Peer = (*Case)(nil)

// Injections is what a case's nemesis did: its fault windows, what each
// injection hit, where it failed to inject, and what a reader must know.
// The nemesis runs beside the runner; the judge records it with the case.
type Injections struct {
	Windows  []results.Window `json:"windows,omitempty"`
	Targets  []results.Target `json:"targets,omitempty"`
	Failures []string         `json:"failures,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
}

// Injected implements Peer: the case's result carries in.
func (c *Case) Injected(in Injections) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.injections = &in
	return nil
}

// Peer returns the peer of open case info.ID: the case itself.
func (j *Judge) Peer(_ context.Context, info CaseInfo) (Peer, error) {
	c := j.Case(info.ID)
	if c == nil {
		return nil, protocolf("case %q: not open", info.ID)
	}
	return c, nil
}

// peerOp carries out a request of a remote peer (RemotePeer) on case
// req.Case.
func (j *Judge) peerOp(ctx context.Context, req *request, rep *reply) error {
	c := j.Case(req.Case)
	if c == nil {
		return protocolf("case %q: not open", req.Case)
	}
	switch req.Op {
	case "live":
		l := c.Live()
		rep.Live = &l
	case "acquiring":
		rep.Acquiring = c.Acquiring()
	case "enough":
		c.Enough()
	case "started":
		ctx, stop := j.bind(ctx)
		defer stop()
		select {
		case <-c.Started():
		case <-ctx.Done():
			return ended(ctx)
		}
		if s := c.Start(); !s.IsZero() {
			rep.StartWall = s.UnixNano()
		}
	case "await-extending":
		ctx, stop := j.bind(ctx)
		defer stop()
		h, err := c.AwaitExtending(ctx)
		if err != nil {
			return ended(ctx)
		}
		rep.Held = &h
	case "pause":
		return c.Pause(req.Process, req.Length, req.Point)
	case "injected":
		if req.Injections == nil {
			return protocolf("injected without the injections")
		}
		return c.Injected(*req.Injections)
	}
	return nil
}

// hookLine is the judge's end of a remote peer's hooks connection: the
// judge sends each call (a grant to decide on, a pause to carry out) with
// a number, and the peer answers them in any order.
type hookLine struct {
	ctx  context.Context
	send func(*reply) error

	mu      sync.Mutex
	next    int64
	pending map[int64]chan request
}

// serveHooks turns the connection into case req.Case's hooks, until the
// connection or the judge closes: the case then runs on without them.
func (j *Judge) serveHooks(ctx context.Context, req *request, reqs <-chan request, enc *json.Encoder, w *bufio.Writer) {
	var wmu sync.Mutex
	send := func(rep *reply) error {
		wmu.Lock()
		defer wmu.Unlock()
		rep.Now = time.Now().UnixNano()
		if err := enc.Encode(rep); err != nil {
			return err
		}
		return w.Flush()
	}
	c := j.Case(req.Case)
	if c == nil {
		var rep reply
		rep.fail(protocolf("case %q: not open", req.Case))
		_ = send(&rep)
		return
	}
	h := &hookLine{ctx: ctx, send: send, pending: map[int64]chan request{}}
	c.SetHooks(h.section, h)
	defer c.SetHooks(nil, nil)
	if send(&reply{}) != nil {
		return
	}
	for {
		select {
		case a := <-reqs:
			if a.Op != "answer" {
				return
			}
			h.mu.Lock()
			ch := h.pending[a.Call]
			delete(h.pending, a.Call)
			h.mu.Unlock()
			if ch != nil {
				ch <- a
			}
		case <-ctx.Done():
			return
		}
	}
}

// call sends msg to the peer and waits for its answer.
func (h *hookLine) call(msg *reply) (request, error) {
	ch := make(chan request, 1)
	h.mu.Lock()
	h.next++
	msg.Call = h.next
	h.pending[msg.Call] = ch
	h.mu.Unlock()
	if err := h.send(msg); err != nil {
		return request{}, fmt.Errorf("the nemesis's hooks: %w", err)
	}
	select {
	case a := <-ch:
		return a, nil
	case <-h.ctx.Done():
		return request{}, fmt.Errorf("the nemesis's hooks: %w", errConnLost)
	}
}

func (h *hookLine) section(ev SectionEvent) Action {
	a, err := h.call(&reply{Event: &ev})
	if err != nil || a.Action == nil {
		return Action{}
	}
	return *a.Action
}

// Pause implements Pauser: the peer stops the process.
func (h *hookLine) Pause(process int, d time.Duration) error {
	a, err := h.call(&reply{PauseProcess: process, PauseLength: d})
	if err != nil {
		return err
	}
	if a.Why != "" {
		return errors.New(a.Why)
	}
	return nil
}
