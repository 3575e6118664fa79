package redlock

import (
	"context"
	"strings"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// call is one node's part of a round: the commands sent to it and the
// replies read back.
type call struct {
	node  *node
	skip  bool   // not part of this round
	slow  bool   // send on the node's connection for grants that WAIT
	run   string // the server process (run_id) the request is for, "" for any
	buf   []byte // the call's own request buffer, reused from round to round
	req   []byte // what to send: buf, or a request shared by every call
	p     *pending
	rep   []reply // the replies, once complete
	err   error   // the node could not be reached, failed, or had not answered
	extra time.Duration
	// once: the request must not run again (the lean grant, whose SET
	// runs whatever its script answers): a NOSCRIPT reply goes to onReply
	// as any other, rather than reload the scripts and send it again.
	once bool
}

// nodeErr wraps the call's error with its node's address.
func (c *call) nodeErr() error {
	if c.err == nil {
		return nil
	}
	return &locker.NodeError{Node: c.node.addr, Err: c.err}
}

// exchange runs one round: it sends every call's request before it waits
// for any reply (build appends a call's request to c.buf, or points c.req
// at a request shared by every call, and sets c.p.want), then hands each
// reply to onReply as it arrives, in arrival order, until onReply says
// the round has its answer (a majority granted, say), every call is done,
// the per-node timeout passes or ctx ends. The calls still unanswered
// then get errNoReply; their replies are read and dropped when they come.
// A node that answers NOSCRIPT gets its scripts loaded and the request
// again (unless the build set c.once). onReply may be nil: wait for every
// call.
//
// need is how many replies the round needs at least before onReply can
// say it has its answer (a quorum; 0: every call): the round sleeps until
// that many have come, instead of waking for each.
func exchange(ctx context.Context, calls []call, timeout time.Duration, need int, build func(int, *call), onReply func(int, *call) bool) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rnd := &round{signal: make(chan struct{}, 1)}
	rnd.left.Store(1 << 30) // no wake-up before the requests are out
	waiting := 0
	for i := range calls {
		c := &calls[i]
		if c.skip {
			continue
		}
		recycle(c.p)
		c.err, c.rep, c.p, c.once = nil, nil, nil, false
		c.buf, c.req, c.run = c.buf[:0], nil, ""
		if err := ctx.Err(); err != nil {
			c.err = err
			continue
		}
		c.p = newPending(rnd)
		build(i, c)
		if c.req == nil {
			c.req = c.buf
		}
		c.p.deadline = deadline.Add(c.extra)
		if c.err = c.node.send(c.p, c.req, c.slow, c.run); c.err != nil {
			c.p = nil // never queued
			continue
		}
		waiting++
	}
	// Wake once need replies have come (those that came already count).
	if need <= 0 || need > waiting {
		need = waiting
	}
	rnd.left.Add(int32(need) - 1<<30)
	if rnd.left.Load() <= 0 {
		rnd.poke()
	}
	// Calls that failed at once (a dead node) are answers too.
	for i := range calls {
		c := &calls[i]
		if !c.skip && c.p == nil && onReply != nil && onReply(i, c) {
			expire(calls, errNoReply)
			return
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for waiting > 0 {
		rnd.left.Store(1) // from now on, wake for each reply
		for i := range calls {
			c := &calls[i]
			if c.skip || c.p == nil || c.rep != nil || c.err != nil || !c.p.done.Load() {
				continue
			}
			waiting--
			if c.err = c.p.err; c.err == nil {
				c.rep = c.p.rep[:c.p.want]
				if !c.once && hasNoScript(c.rep) {
					c.err = c.reload(ctx, deadline.Add(c.extra))
				}
			}
			if onReply != nil && onReply(i, c) {
				expire(calls, errNoReply)
				return
			}
		}
		if waiting == 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline) + maxExtra(calls))
		}
		select {
		case <-rnd.signal:
		case <-timer.C:
			expire(calls, errTimeout)
			return
		case <-ctx.Done():
			expire(calls, ctx.Err())
			return
		}
	}
}

// settle waits for the replies a round stopped waiting for (the calls
// that got errNoReply): it hands each one that has come, or comes within
// wait, to onReply, as exchange would have, and waits while a call for
// which awaited(i) holds has not answered. The calls still unanswered then
// keep errNoReply.
func settle(calls []call, wait time.Duration, awaited func(int) bool, onReply func(int, *call)) {
	var signal chan struct{}
	for i := range calls {
		if c := &calls[i]; !c.skip && c.p != nil && c.err == errNoReply {
			// From now on each reply of the round pokes it: one that came
			// before is seen done below.
			signal = c.p.round.signal
			c.p.round.left.Store(1)
			break
		}
	}
	if signal == nil {
		return
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		open := false
		for i := range calls {
			c := &calls[i]
			if c.skip || c.p == nil || c.err != errNoReply {
				continue
			}
			if !c.p.done.Load() {
				open = open || awaited(i)
				continue
			}
			if c.err = c.p.err; c.err == nil {
				c.rep = c.p.rep[:c.p.want]
			}
			onReply(i, c)
		}
		if !open {
			return
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case <-signal:
		case <-timer.C:
			return
		}
	}
}

// expire gives the calls still unanswered err.
func expire(calls []call, err error) {
	for i := range calls {
		c := &calls[i]
		if !c.skip && c.p != nil && c.rep == nil && c.err == nil {
			c.err = err
		}
	}
}

func maxExtra(calls []call) time.Duration {
	var d time.Duration
	for i := range calls {
		d = max(d, calls[i].extra)
	}
	return d
}

// reload loads the scripts on a node that lost them (SCRIPT FLUSH, or a
// restart behind a proxy that kept the connection) and sends the call's
// request again, waiting for it alone. The requests are idempotent up to
// their scripts, which NOSCRIPT did not run.
func (c *call) reload(ctx context.Context, deadline time.Time) error {
	return c.load(ctx, deadline, true)
}

// load loads the scripts on the call's node, followed by the call's
// request again when again is set (its replies then replace the call's),
// and waits for the node's answer.
func (c *call) load(ctx context.Context, deadline time.Time, again bool) error {
	var req []byte
	for _, s := range allScripts {
		req = appendCommand(req, "SCRIPT", "LOAD", s.src)
	}
	rnd := &round{signal: make(chan struct{}, 1)}
	rnd.left.Store(1)
	p := newPending(rnd)
	p.want, p.deadline = len(allScripts), deadline
	if again {
		req = append(req, c.req...)
		p.want += c.p.want
	}
	if err := c.node.send(p, req, c.slow, c.run); err != nil {
		return err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-rnd.signal:
	case <-timer.C:
		return errNoReply
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.err != nil {
		return p.err
	}
	for _, r := range p.rep[:len(allScripts)] {
		if err := r.err(); err != nil {
			return err
		}
	}
	if !again {
		recycle(p)
		return nil
	}
	recycle(c.p)
	c.p = p
	c.rep = p.rep[len(allScripts):p.want]
	return nil
}

func hasNoScript(reps []reply) bool {
	for _, r := range reps {
		if r.kind == '-' && strings.HasPrefix(r.s, "NOSCRIPT") {
			return true
		}
	}
	return false
}
