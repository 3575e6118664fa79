package redlock

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Fast hand-off. When a key is released, the release script pushes a
// token on the key's hand-off list (on the first handoffNodes nodes in
// canonical order), and a waiter blocks in BLPOP on that list, on a
// connection of its own. Redis serves blocked clients first come, first
// served, so a release wakes exactly one waiter — the one that has waited
// longest, in whatever process — instead of every waiter at once: no herd,
// no split votes among the woken, and FIFO fairness across processes. A
// waiter woken for nothing (an unclaimed token, a key taken by a newcomer)
// just waits again; a holder that dies without releasing pushes no token,
// and waiters then retry on their backoff timer, as they would anyway.

// handoffNodes is how many nodes keep hand-off tokens: the priority node,
// and one more for when it is down.
const handoffNodes = 2

// handoffSuffix names a key's hand-off list: key + handoffSuffix.
const handoffSuffix = ":handoff"

// blockFor is how long one BLPOP blocks before it is reissued.
const blockFor = time.Second

// handoff runs the hand-off waits of a Redlock.
type handoff struct {
	r  *Redlock
	wg sync.WaitGroup
}

// wait starts waiting for key's hand-off tokens: each token popped sends
// a value on wake (which must have a buffer of one). stop ends the wait.
func (w *handoff) wait(key string, wake chan struct{}) (stop func()) {
	ctx, cancel := context.WithCancel(w.r.life)
	var mu sync.Mutex
	var c *conn // the blocking connection, closed to interrupt BLPOP
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		list := key + handoffSuffix
		req := appendCommand(nil, "BLPOP", list, strconv.FormatFloat(blockFor.Seconds(), 'f', -1, 64))
		for ctx.Err() == nil {
			n := w.node()
			if n == nil {
				sleep(ctx, downFor)
				continue
			}
			nc, err := dial(ctx, n.opt, time.Now().Add(adminTimeout))
			if err != nil {
				sleep(ctx, downFor)
				continue
			}
			mu.Lock()
			if ctx.Err() != nil {
				mu.Unlock()
				nc.nc.Close()
				return
			}
			c = nc
			mu.Unlock()
			for ctx.Err() == nil {
				r, err := nc.call(req, time.Now().Add(blockFor+adminTimeout))
				if err != nil {
					break
				}
				if r.kind == '*' { // a token: [list, value]
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
			nc.nc.Close()
		}
	}()
	return func() {
		cancel()
		mu.Lock()
		if c != nil {
			c.nc.Close()
		}
		mu.Unlock()
	}
}

// node returns the first hand-off node that is not known to be down.
func (w *handoff) node() *node {
	now := time.Now()
	for _, n := range w.r.nodes[:min(handoffNodes, len(w.r.nodes))] {
		n.mu.Lock()
		down := now.Before(n.downUntil) || n.closed
		n.mu.Unlock()
		if !down {
			return n
		}
	}
	return nil
}

// call sends one request on a connection nobody else uses and reads its
// reply.
func (c *conn) call(req []byte, deadline time.Time) (reply, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return reply{}, err
	}
	if _, err := c.nc.Write(req); err != nil {
		return reply{}, err
	}
	return readReply(c.rd)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
