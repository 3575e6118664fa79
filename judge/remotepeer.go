package judge

import (
	"bufio"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
)

// RemotePeer is a case's Peer on a judge in another process, for a
// nemesis that runs beside the runner while the judge runs elsewhere (on
// a host of an inventory). It holds three kinds of connection, each
// presenting the run's token: one for its quick queries (the live view,
// Enough, the injections), one on which the judge calls it (the section
// hook and the pauses it asks for, answered concurrently), and one per
// wait (the start barrier, an extension). Its connections close when the
// ctx given to Remote.Peer ends.
type RemotePeer struct {
	r      *Remote
	id     string
	prefix string
	ctx    context.Context
	q      *line

	mu     sync.Mutex
	hook   SectionHook
	pauser Pauser
	start  time.Time
	// err is the first error of a query whose signature has no room for
	// one (Live, Acquiring): the nemesis then sees an empty view, and
	// proves nothing with it.
	err error

	started chan struct{}
}

var _ Peer = (*RemotePeer)(nil)

// Peer connects a nemesis to case info on the remote judge (opened by
// Open) until ctx ends: it installs the hooks connection at once, so the
// judge asks it about every grant from the start.
func (r *Remote) Peer(ctx context.Context, info CaseInfo) (Peer, error) {
	q, err := dial(ctx, r.addr, r.opts...)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { q.conn.Close() })
	// A first quick call bounds the judge's clock against ours (Start).
	if _, err := q.call(ctx, &request{Op: "run"}); err != nil {
		q.conn.Close()
		return nil, err
	}
	p := &RemotePeer{r: r, id: info.ID, prefix: info.KeyPrefix, ctx: ctx, q: q, started: make(chan struct{})}
	h, err := dial(ctx, r.addr, r.opts...)
	if err != nil {
		q.conn.Close()
		return nil, err
	}
	context.AfterFunc(ctx, func() { h.conn.Close() })
	if _, err := h.call(ctx, &request{Op: "hooks", Case: info.ID}); err != nil {
		q.conn.Close()
		h.conn.Close()
		return nil, err
	}
	go p.answer(h)
	go p.awaitStart()
	return p, nil
}

// answer serves the judge's calls on the hooks connection until it
// closes, each call in a goroutine of its own: a pause that takes a
// round trip to a host does not hold up the next grant's hook.
func (p *RemotePeer) answer(h *line) {
	dec := json.NewDecoder(bufio.NewReader(h.conn))
	var wmu sync.Mutex
	var calls sync.WaitGroup
	defer calls.Wait()
	for {
		var c reply
		if err := dec.Decode(&c); err != nil {
			return
		}
		calls.Go(func() {
			a := request{Op: "answer", Call: c.Call}
			p.mu.Lock()
			hook, pauser := p.hook, p.pauser
			p.mu.Unlock()
			switch {
			case c.Event != nil:
				act := Action{}
				if hook != nil {
					act = hook(*c.Event)
				}
				a.Action = &act
			case pauser == nil:
				a.Why = "the nemesis has no pauser"
			default:
				if err := pauser.Pause(c.PauseProcess, c.PauseLength); err != nil {
					a.Why = err.Error()
				}
			}
			wmu.Lock()
			defer wmu.Unlock()
			if h.enc.Encode(&a) == nil {
				_ = h.w.Flush()
			}
		})
	}
}

// awaitStart waits for the start barrier on a connection of its own and
// closes started; the start, on the judge's clock, is moved onto ours
// by the middle of the offset the quick calls bound.
func (p *RemotePeer) awaitStart() {
	defer close(p.started)
	l, err := dial(p.ctx, p.r.addr, p.r.opts...)
	if err != nil {
		p.fail(err)
		return
	}
	defer l.conn.Close()
	rep, err := l.call(p.ctx, &request{Op: "started", Case: p.id})
	if err != nil {
		p.fail(err)
		return
	}
	if rep.StartWall == 0 {
		return // cancelled before its start
	}
	p.q.mu.Lock()
	lo, hi := p.q.theta()
	p.q.mu.Unlock()
	theta := int64(0)
	if lo != noBound {
		theta = lo + (hi-lo)/2
	}
	p.mu.Lock()
	p.start = time.Unix(0, rep.StartWall-theta)
	p.mu.Unlock()
}

func (p *RemotePeer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// Err is the first error of a call to the judge that could not return
// one (Live, Acquiring, the wait for the start).
func (p *RemotePeer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// SetHooks implements Peer.
func (p *RemotePeer) SetHooks(hook SectionHook, pauser Pauser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook, p.pauser = hook, pauser
}

// Started implements Peer.
func (p *RemotePeer) Started() <-chan struct{} { return p.started }

// Start implements Peer: on this process's clock.
func (p *RemotePeer) Start() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// query makes a quick call on the query connection, bounded by a minute.
func (p *RemotePeer) query(req *request) (*reply, error) {
	req.Case = p.id
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	return p.q.call(ctx, req)
}

// Enough implements Peer.
func (p *RemotePeer) Enough() {
	if _, err := p.query(&request{Op: "enough"}); err != nil {
		p.fail(err)
	}
}

// Live implements Peer; empty when the judge cannot be asked (Err says
// why).
func (p *RemotePeer) Live() Live {
	rep, err := p.query(&request{Op: "live"})
	if err != nil || rep.Live == nil {
		p.fail(err)
		return Live{}
	}
	return *rep.Live
}

// KeyPrefix implements Peer.
func (p *RemotePeer) KeyPrefix() string { return p.prefix }

// Acquiring implements Peer; empty when the judge cannot be asked.
func (p *RemotePeer) Acquiring() map[int]time.Duration {
	rep, err := p.query(&request{Op: "acquiring"})
	if err != nil {
		p.fail(err)
		return map[int]time.Duration{}
	}
	if rep.Acquiring == nil {
		return map[int]time.Duration{}
	}
	return rep.Acquiring
}

// AwaitExtending implements Peer, on a connection of its own.
func (p *RemotePeer) AwaitExtending(ctx context.Context) (Held, error) {
	l, err := dial(ctx, p.r.addr, p.r.opts...)
	if err != nil {
		return Held{}, err
	}
	defer l.conn.Close()
	rep, err := l.call(ctx, &request{Op: "await-extending", Case: p.id})
	if err != nil {
		return Held{}, err
	}
	return *rep.Held, nil
}

// Pause implements Peer: the judge records the pause and calls this
// peer's pauser to carry it out.
func (p *RemotePeer) Pause(process int, d time.Duration, at history.Point) error {
	_, err := p.query(&request{Op: "pause", Process: process, Length: d, Point: at})
	return err
}

// Injected implements Peer.
func (p *RemotePeer) Injected(in Injections) error {
	_, err := p.query(&request{Op: "injected", Injections: &in})
	return err
}
