package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// The lean path: what an uncontended grant costs each server.
//
// The acquire script (acquire.lua) does, on each node, the quarantine
// check, the grant's record, the sweep of one stale record, the queue
// and the fencing counter: a server spends more on it than on the SET NX
// PX of the published algorithm (docs/measurements.md, "lean path"). An
// uncontended grant needs little of it. Its first try sends each node
// plain commands instead, written at once and run in order,
//
//	SET key value NX PX ttl; HSETNX state key '<expiry> <value>'; HGET state marker;
//	EVALSHA advance 1 counter floor life
//
// (without the restart quarantine, no HSETNX and HGET; without fencing
// tokens, no EVALSHA; with them but without the clock floor, INCR counter
// instead, which is what the advance script does then), and takes
// client-side the decisions the script takes on the node:
//
//   - the quarantine: the marker the node returned (read after the SET)
//     must admit the server process the connection found, as the script's
//     check does; a node whose marker does not is suspected and given back
//     what was set there;
//   - the grant's record (the trace that tells a lock key evicted behind
//     Redlock's back): HSETNX writes it unless a record of the key is
//     there already — a lock that expired without a release, or one
//     evicted — which the full script must judge;
//   - the max TTL recorded on the marker must cover this client's, or the
//     full script must raise it;
//   - the fencing token: the advance script (advance.lua) runs the
//     acquire script's own tail (fence.lua) on the key's counter, so each
//     node returns the token the full script would have (without the
//     clock floor that tail is an INCR, and a plain INCR spares the node a
//     script's cost); the lease's token is the highest the granting nodes
//     returned, written back until a majority has it (fence), as on the
//     full path.
//
// No MULTI makes them one transaction (a server spends on MULTI, EXEC
// and the queueing of each command as much as on a command): another
// client's commands may run between them, and nothing that can run there
// undoes what the checks prove. A restart closes the connection, so the
// replies never come; a marker read after the SET that names the process
// the connection found proves the node admitted it after the SET (a node
// flushed in between has lost its marker, and a script that judged an
// eviction there removed it); while the key is ours no other grant of it
// runs on the node, so the record written after the SET is this grant's,
// and a key evicted before it was written leaves a record of a key that
// is gone, which the next full grant judges as any other.
//
// The counter advances whether or not the SET set the key: the
// commands cannot branch, and a counter advanced for no grant (a node
// where the key was held, one given back, a try that falls back to the
// full path, which advances it again) leaves a gap between tokens, never
// a decrease. Every grant's token is on a majority of the nodes before
// its lease exists, so the next grant's majority meets a node whose
// counter is at least that token, and its own token is above it.
//
// A try that a quorum granted while other nodes hold another value (the
// key handed or reserved to waiters there, or a try that fails) keeps its
// grant and, in an Acquire, takes the key on those
// nodes, awaiting first the answers its round did not wait for (see
// takeHeld) — when an answer read (one that came after the round's last
// included) says so: an uncontended grant waits for no more answers than a
// quorum's. Else the key lives on a bare majority, and a minority of it
// that forgets the key (a clock jump) lets a waiter take it with the nodes
// that never had it. A try that finds the key held on too many nodes for a
// quorum, a record there already, a marker to raise, or too few nodes
// granting gives back what it set (release_lean: the key was free, so
// freeing it hands nothing on) and the attempt goes on at once with a try
// of the full path, which queues, judges the record, raises the marker and
// explains a refusal. A key whose lean try found it held takes the full
// path directly for hotFor, so that a hot key's waiters do not pay a lean
// round before each full one.
//
// The lean path is not taken with WithWait or WithQuorumFirst. A lease
// granted on it is released by release.lua, as any other: a release must
// hand the key to its waiters on every node that has them, and a small
// script that left that to a second round lost the hand-off on the nodes
// whose answer came after the round had its majority (a key stuck on
// its queue nodes until its TTL). It also sweeps expired records there, now and then
// (see sweepBatch), which the lean grant does not. release_lean.lua only
// gives back what a lean try set.
//
// The record's expiry is this client's clock plus the TTL, plus recordPad
// for the difference between its clock and the node's (the script uses
// the node's): a record that outlives its key costs at most one full
// grant later, one that dies first would hide an eviction.

// hotFor is how long a key whose lean try found it held takes the full
// path directly.
const hotFor = time.Second

// recordPad is how much longer than its key a lean grant's record lives.
const recordPad = 2 * time.Second

// leanWhat names the lean grant in errors.
const leanWhat = "the lean grant (SET, HSETNX, HGET, EVALSHA or INCR with fencing)"

// hotKeys are the keys that take the full path for a while: their last
// lean try found them held.
type hotKeys struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (h *hotKeys) mark(key string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil || len(h.until) > 4096 {
		h.until = map[string]time.Time{}
	}
	h.until[key] = now.Add(hotFor)
}

func (h *hotKeys) hot(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.until[key]
	if ok && !now.Before(until) {
		delete(h.until, key)
		return false
	}
	return ok
}

// lean reports whether the attempt's try takes the lean path: its first
// try, with options the lean path serves, on a key not found held lately.
func (a *attempt) lean() bool {
	c := &a.r.c
	return a.tries == 1 && c.waitReplicas == 0 && !c.quorumFirst && !a.r.hot.hot(a.key, time.Now())
}

// runLean makes the attempt's try on the lean path. It returns the lease,
// or the error that ends the attempt (too many nodes refuse the
// configuration), or neither: the try gave back what it set, and the
// attempt goes on with a full try.
func (a *attempt) runLean(ctx context.Context) (locker.Lease, error) {
	r := a.r
	now := time.Now()
	for i := range a.calls {
		c := &a.calls[i]
		c.skip, c.extra, c.slow = false, 0, false
		run, ok, why := c.node.votes(now)
		if !ok {
			c.skip = true
			a.state[i] = excluded
			a.cause[i] = &locker.NodeError{Node: c.node.addr, Err: why}
			continue
		}
		a.state[i], a.runs[i] = notAsked, run
		a.slow[i] = !c.node.answering(now)
	}
	a.full = false
	clear(a.mine)
	a.rounds++
	record := strconv.FormatInt(now.Add(a.o.TTL+recordPad).UnixMilli(), 10) + " "
	floor := r.floor(now)
	exchange(ctx, a.calls, r.timeout(a.o.TTL), r.quorum, func(i int, c *call) {
		c.run, c.once = a.runs[i], true
		c.buf, c.p.want = a.appendLean(c.buf, record, floor)
	}, func(i int, c *call) bool {
		a.recordLean(ctx, i, c)
		g, open := 0, 0
		for i, s := range a.state {
			switch {
			case s == granted:
				g++
			case s == notAsked && !a.calls[i].skip:
				open++
			}
		}
		return a.full || g >= r.quorum || g+open < r.quorum
	})
	for i := range a.calls {
		c := &a.calls[i]
		if c.skip || a.state[i] != notAsked {
			continue
		}
		if c.err == errNoReply {
			a.state[i], a.set[i] = late, true // it may still set the key
		} else {
			a.recordLean(ctx, i, c)
		}
	}
	if !a.full && a.count(granted) >= r.quorum {
		// Granted by a quorum: where another value has the key (among
		// the answers read, those that came after the round's last
		// included), it is taken, as after a waiter's try (see
		// takeHeld). An uncontended grant does not wait for the rest.
		recordLean := func(i int, c *call) { a.recordLean(ctx, i, c) }
		settle(a.calls, 0, func(int) bool { return false }, recordLean)
		if a.count(held) > 0 {
			a.takeHeld(ctx, recordLean)
		}
		// A token that fails to reach a majority gives the grant back: the
		// full try that follows explains a refusal.
		if token, err := a.fence(ctx); err == nil {
			validUntil := a.start.Add(a.o.TTL - a.driftAllowance())
			if r.now().Before(validUntil) {
				return a.lease(token, validUntil, true), nil
			}
		}
	}
	a.undo(ctx)
	if a.count(held) > 0 {
		r.hot.mark(a.key, time.Now())
		if !a.queue {
			// TryAcquire: held is its answer; what it set is given back.
			clear(a.set)
			return nil, a.fail(ctx, "")
		}
	}
	if err := a.refused(); err != nil {
		return nil, err
	}
	return nil, nil
}

// appendLean appends the lean grant's commands to b, with floor for its
// fencing token, and returns how many replies they have.
func (a *attempt) appendLean(b []byte, record string, floor int64) ([]byte, int) {
	r := a.r
	b = appendArray(b, 6)
	b = appendBulk(b, "SET")
	b = appendBulk(b, a.key)
	b = appendBulk(b, a.value)
	b = appendBulk(b, "NX")
	b = appendBulk(b, "PX")
	b = appendBulkInt(b, a.o.TTL.Milliseconds())
	want := 1
	if r.c.quarantine {
		b = appendArray(b, 4)
		b = appendBulk(b, "HSETNX")
		b = appendBulk(b, r.k.node)
		b = appendBulk(b, a.key)
		b = appendBulkConcat(b, record, a.value)
		b = appendCommand(b, "HGET", r.k.node, r.k.marker)
		want += 2
	}
	switch {
	case r.c.fencing && r.c.clockFloor:
		b = appendArray(b, 6)
		b = appendBulk(b, "EVALSHA")
		b = appendBulk(b, advanceScript.sha)
		b = appendBulk(b, "1")
		b = appendBulkConcat(b, r.k.token, a.key)
		b = appendBulkInt(b, floor)
		b = appendBulkInt(b, r.counterLife().Milliseconds())
		want++
	case r.c.fencing:
		// fence.lua with no floor and a counter that lives for ever
		// (counterLife): INCR alone.
		b = appendArray(b, 2)
		b = appendBulk(b, "INCR")
		b = appendBulkConcat(b, r.k.token, a.key)
		want++
	}
	return b, want
}

// recordLean turns node i's replies to the lean grant into its outcome,
// and sets a.full when the full script must run there.
func (a *attempt) recordLean(ctx context.Context, i int, c *call) {
	r := a.r
	a.set[i] = true // a request that timed out may still have set the key
	if c.err != nil {
		a.nodeFailed(i, c, c.err)
		return
	}
	for _, rep := range c.rep {
		err := rep.err()
		if err == nil {
			continue
		}
		err = explain(leanWhat, err)
		if strings.HasPrefix(rep.s, "NOSCRIPT") {
			// The node lost its scripts (SCRIPT FLUSH, or a restart
			// behind a proxy) and the advance script did not run: the
			// commands cannot be sent again (the SET ran), so the node
			// fails this try, and gets its scripts now, before what the
			// try set there is given back with a script.
			if lerr := c.load(ctx, time.Now().Add(r.timeout(a.o.TTL)), false); lerr != nil {
				err = errors.Join(err, lerr)
			}
		}
		a.nodeFailed(i, c, err)
		return
	}
	if c.rep[0].kind != '+' { // SET NX found the key
		a.state[i], a.set[i] = held, false
		a.token[i] = int64(waitRefresh / time.Millisecond)
		return
	}
	if r.c.fencing {
		last := c.rep[len(c.rep)-1]
		if last.kind != ':' {
			a.nodeFailed(i, c, errProtocolf("%s: the fencing counter answered %q", leanWhat, last.s))
			return
		}
		a.token[i] = last.n
	}
	if !r.c.quarantine {
		a.state[i] = granted
		return
	}
	admitted, covers := a.admits(i, c.rep[2])
	if !admitted {
		a.nodeLost(i, c) // what it set is given back
		return
	}
	a.state[i] = granted
	a.mine[i] = c.rep[1].n == 1
	if !a.mine[i] || !covers {
		a.full = true // a record to judge, or a max TTL to raise: the script's work
	}
}

// admits reads node i's marker, read after the lean grant's SET, as the
// acquire script's check does: whether it admits the server process the
// connection found, and whether the max TTL it records covers this
// client's.
func (a *attempt) admits(i int, marker reply) (admitted, covers bool) {
	f := strings.Fields(marker.s)
	if marker.kind != '$' || len(f) != 3 || f[0] != a.runs[i] {
		return false, false
	}
	maxTTL, err := strconv.ParseInt(f[1], 10, 64)
	return true, err == nil && maxTTL >= a.r.c.maxTTL.Milliseconds()
}

// undo gives back, without waiting, what a lean try may have set.
func (a *attempt) undo(ctx context.Context) {
	a.giveBackOn(ctx, func(i int) bool { return a.set[i] })
}

// giveBackOn gives back, without waiting, what the attempt set on the
// nodes for which which(i) holds; they no longer hold it for the
// attempt.
func (a *attempt) giveBackOn(ctx context.Context, which func(int) bool) {
	some := false
	for i := range a.calls {
		a.calls[i].skip = !which(i)
		a.calls[i].extra, a.calls[i].slow = 0, false
		some = some || !a.calls[i].skip
	}
	for i := range a.calls {
		if !a.calls[i].skip {
			a.set[i] = false
		}
	}
	if !some {
		return
	}
	exchange(context.WithoutCancel(ctx), a.calls, 0, 0, func(i int, c *call) {
		c.buf = a.appendUndo(c.buf, i)
		c.p.want = 1
	}, func(int, *call) bool { return true })
}

// appendUndo appends release_lean.lua's EVALSHA for node i to b.
func (a *attempt) appendUndo(b []byte, i int) []byte {
	r := a.r
	mode := "0"
	switch {
	case !r.c.quarantine:
	case a.mine[i]:
		mode = "1"
	default:
		mode = "2"
	}
	b = appendArray(b, 7)
	b = appendBulk(b, "EVALSHA")
	b = appendBulk(b, leanScript.sha)
	b = appendBulk(b, "2")
	b = appendBulk(b, a.key)
	b = appendBulk(b, r.k.node)
	b = appendBulk(b, a.value)
	return appendBulk(b, mode)
}

// refused returns the error that ends an attempt when too many nodes
// refuse Redlock's configuration for a quorum (retrying cannot help), nil
// otherwise.
func (a *attempt) refused() error {
	var causes []error
	refused := 0
	for _, c := range a.cause {
		if c != nil {
			causes = append(causes, c)
			if errors.Is(c, ErrConfig) {
				refused++
			}
		}
	}
	if refused > len(a.state)-a.r.quorum {
		return fmt.Errorf("acquire %q: %d of %d nodes refused Redlock's configuration, too many for a quorum of %d: %w",
			a.key, refused, len(a.state), a.r.quorum, errors.Join(causes...))
	}
	return nil
}
