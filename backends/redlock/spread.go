package redlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// spread sets a key that a release handed to the attempt's Acquire on
// the nodes other than its queue nodes, as a grant of the attempt's try
// would have, and returns the nodes that may hold the key for the lease:
// the queue nodes that handed it over (told), and the others the spread
// was sent to. Without it a handed key lives on the queue nodes only, a
// bare majority, and one of them that forgets it (its clock jumps
// forward, it restarts with the restart quarantine off, an eviction
// nothing detects) lets a newcomer assemble a majority with the nodes
// that never had it; with it, a handed key survives as many such nodes as
// an ordinary grant.
//
// Each of those nodes that votes is sent the acquire script, with the
// hand-off value and the Acquire's TTL, told to take the key (no queue is
// kept there): the restart quarantine's check, the judgement of a record
// already there and the grant's record, as for any grant. Unlike a try,
// it takes the key where another value has it: the queue nodes, a
// majority, hold it for this Acquire, so no other value is a live
// grant's — it is the value of a release still on its way there, or of a
// try that fails (the client that released the key and asks for it again
// at once is usually first on the nodes the release freed, and would keep
// the spread out).
//
// The spread is sent, not waited for: the node judges on its own what a
// client would have judged from its answer, so the answer changes nothing
// (a node that refuses does not vote, and holds nothing). A spread still
// on its way when the lease begins is as safe as an ordinary grant's late
// nodes: a newcomer needs a majority, hence a queue node, and those refuse
// it while the key is handed unless one forgets the key in that round
// trip, which a key handed a moment ago with a whole TTL is far from; the
// release that frees the key follows the spread on the same connection.
//
// Not with WithQuorumFirst, whose grants set the key on a quorum only
// either; with fencing tokens or WithWait there is no hand-off to spread
// (see handed: the try's round, which asks every node, claims the key).
func (a *attempt) spread(ctx context.Context, told []bool) []bool {
	r := a.r
	on := slices.Clone(told)
	if r.c.quorumFirst {
		return on
	}
	now := time.Now()
	some := false
	for i := range a.calls {
		c := &a.calls[i]
		c.skip, c.extra, c.slow = told[i] || r.queues(a.home, i), 0, false
		if c.skip {
			continue
		}
		run, ok, _ := c.node.votes(now)
		if !ok {
			c.skip = true
			continue
		}
		a.runs[i], on[i], some = run, true, true
	}
	if !some {
		return on
	}
	a.rounds++
	// The script sets the try's value: the hand-off value here.
	try := a.value
	a.value = a.handoff
	defer func() { a.value = try }()
	exchange(context.WithoutCancel(ctx), a.calls, 0, 0, func(i int, c *call) {
		c.run = a.runs[i]
		c.buf, c.p.want = a.appendAcquire(c.buf, i, c.run, 0, true), 1
	}, func(int, *call) bool { return true })
	return on
}

// takeHeld takes the key, after a try of an Acquire that a quorum
// granted (a waiter's that claimed a key handed or reserved to it, or was
// first on its queue nodes; or a lean try that met other values), on the
// nodes where it found another value: a quorum holds the
// key for this try, so no other value is a live grant's (see spread),
// and a claimed key lives on every node that answers, as a handed one.
// The round stopped at the quorum's last grant, so the other nodes'
// answers are awaited first, for a quarter of the node timeout at most
// and not from the nodes that were not answering: a value found there
// is taken too, and so is the key on a node whose answer does not come
// (it may have found another value). recordReply records a node's
// answer to the try (record, or recordLean for a lean try). With fencing
// tokens too: take leaves the nodes' counters alone, and the grant's token
// is still the quorum's that granted it (see fence), which the next
// grant's majority meets. Not with WithWait or WithQuorumFirst.
func (a *attempt) takeHeld(ctx context.Context, recordReply func(int, *call)) {
	r := a.r
	if !a.queue || r.c.waitReplicas > 0 || r.c.quorumFirst {
		return
	}
	if a.count(late) > 0 {
		settle(a.calls, r.timeout(a.o.TTL)/4, func(i int) bool { return !a.slow[i] }, recordReply)
	}
	if a.count(held)+a.count(late) == 0 {
		return
	}
	a.take(ctx, func(i int) bool { return a.state[i] == held || a.state[i] == late })
}

// take sets a.value, whatever the key holds (see spread), on the nodes
// for which which(i) holds and that vote, and records their outcomes; it
// waits for those that answer, for a quarter of the node timeout at most.
//
// It sends each node plain commands, as the lean grant does (see
// lean.go), rather than the acquire script:
//
//	HGET state key; SET key value PX ttl GET; HSET state key '<expiry> <value>'; HGET state marker
//
// (without the restart quarantine, the SET alone, whose GET is then unread), and decides from the
// replies as the acquire script would have: the marker read after the
// SET must admit the server process the connection found (else the node
// gets back what was set, and is left out) and record a max TTL that
// covers this client's; a record the HSET replaced must be ours, or that
// of a value the key held (a release on its way, a try that fails: the
// script overwrites it too). A record of another value where the key was
// free is one the acquire script judges (an eviction?), and a max TTL to
// raise is the script's work: such a node gets back what was set and the
// record it had (release_lean), then runs the acquire script, in one
// request. The take is best effort. It is used without WithWait only.
// Its plain commands set no fencing token (the node's counter is left as
// it is, and the node holds no token for fence to count); a node sent to
// the acquire script gets one, which fence counts as any granting node's.
// So nothing else of the script is needed.
func (a *attempt) take(ctx context.Context, which func(int) bool) {
	r := a.r
	now := time.Now()
	some, awaited := false, false
	for i := range a.calls {
		c := &a.calls[i]
		c.skip, c.extra, c.slow = !which(i), 0, false
		if c.skip {
			continue
		}
		run, ok, _ := c.node.votes(now)
		if !ok {
			c.skip = true
			continue
		}
		a.state[i], a.set[i], a.cause[i], a.mine[i], a.prior[i], a.token[i] = notAsked, false, nil, false, "", 0
		a.runs[i], a.slow[i] = run, !c.node.answering(now)
		some, awaited = true, awaited || !a.slow[i]
	}
	if !some {
		return
	}
	a.rounds++
	wait := r.timeout(a.o.TTL) / 4
	if !awaited {
		wait = 0 // sent, and not waited for
	}
	record := strconv.FormatInt(now.Add(a.o.TTL+recordPad).UnixMilli(), 10) + " "
	exchange(context.WithoutCancel(ctx), a.calls, wait, 0, func(i int, c *call) {
		c.run, c.once = a.runs[i], true
		c.buf, c.p.want = a.appendTake(c.buf, record)
	}, func(i int, c *call) bool {
		a.recordTake(i, c)
		for i, s := range a.state {
			if s == notAsked && !a.calls[i].skip && !a.slow[i] {
				return false
			}
		}
		return true
	})
	for i := range a.calls {
		c := &a.calls[i]
		switch {
		case c.skip || a.state[i] != notAsked:
		case errors.Is(c.err, errNoReply):
			a.set[i] = true // it may still set the key
		default: // timed out: it may still set the key
			a.recordTake(i, c)
		}
	}
	// A node whose marker fails (a cause) gets back what was set; one with
	// a record to judge or a max TTL to raise (none), that and the record
	// it had, then the acquire script (the key was free there, or the
	// marker is raised first), in one request.
	back := func(i int) bool { return !a.calls[i].skip && a.state[i] == excluded && a.set[i] }
	var redo []bool
	for i := range a.calls {
		if back(i) && a.cause[i] == nil {
			if redo == nil {
				redo = make([]bool, len(a.calls))
			}
			redo[i] = true
		}
	}
	a.giveBackOn(ctx, func(i int) bool { return back(i) && a.cause[i] != nil })
	if redo == nil {
		return
	}
	for i := range a.calls {
		a.calls[i].skip = !redo[i]
	}
	exchange(context.WithoutCancel(ctx), a.calls, wait, 0, func(i int, c *call) {
		c.run = a.runs[i]
		c.buf = a.appendUndo(c.buf, i)
		c.buf = a.appendAcquire(c.buf, i, c.run, 0, false)
		c.p.want = 2
	}, func(i int, c *call) bool {
		if c.err == nil {
			c.rep = c.rep[1:] // the acquire script's
		}
		a.record(i, c)
		return false
	})
}

// appendTake appends take's commands to b, and returns how many replies
// they have.
func (a *attempt) appendTake(b []byte, record string) ([]byte, int) {
	r := a.r
	if r.c.quarantine {
		b = appendCommand(b, "HGET", r.k.node, a.key)
	}
	b = appendArray(b, 6)
	b = appendBulk(b, "SET")
	b = appendBulk(b, a.key)
	b = appendBulk(b, a.value)
	b = appendBulk(b, "PX")
	b = appendBulkInt(b, a.o.TTL.Milliseconds())
	b = appendBulk(b, "GET")
	if !r.c.quarantine {
		return b, 1
	}
	b = appendArray(b, 4)
	b = appendBulk(b, "HSET")
	b = appendBulk(b, r.k.node)
	b = appendBulk(b, a.key)
	b = appendBulkConcat(b, record, a.value)
	return appendCommand(b, "HGET", r.k.node, r.k.marker), 4
}

// recordTake turns node i's replies to take's commands into its outcome:
// granted, failed, or excluded where what was set is given back.
func (a *attempt) recordTake(i int, c *call) {
	a.set[i] = true // a request that timed out may still have set the key
	if c.err != nil {
		a.nodeFailed(i, c, c.err)
		return
	}
	for _, rep := range c.rep {
		if err := rep.err(); err != nil {
			a.nodeFailed(i, c, explain(takeWhat, err))
			return
		}
	}
	if !a.r.c.quarantine {
		a.state[i] = granted
		return
	}
	a.mine[i] = true // the HSET wrote the key's record
	// A record of another value: the key's (held) or one to judge.
	prior, held := c.rep[0], c.rep[1].kind == '$'
	foreign := prior.kind == '$' && !strings.HasSuffix(prior.s, " "+a.value)
	admitted, covers := a.admits(i, c.rep[3])
	if admitted && covers && !(foreign && !held) {
		a.state[i] = granted
		return
	}
	if !admitted {
		a.nodeLost(i, c)
	}
	if foreign {
		a.prior[i] = prior.s // put back with the key's give-back
	}
	a.state[i] = excluded
}

// unspread gives back what spread set, when the lease it was for is not
// granted after all (its validity ran out meanwhile): the try that
// follows claims the key where it was handed over, and finds it free on
// the other nodes.
func (a *attempt) unspread(ctx context.Context, told, on []bool) {
	some := false
	for i := range a.calls {
		a.calls[i].skip = !on[i] || told[i]
		a.calls[i].extra, a.calls[i].slow = 0, false
		some = some || !a.calls[i].skip
	}
	if some {
		a.r.send(ctx, a.calls, a.key, a.handoff, a.r.reserveFor(a.o.TTL))
	}
}
