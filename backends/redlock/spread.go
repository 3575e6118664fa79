package redlock

import (
	"context"
	"errors"
	"slices"
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
// (see handed: the try claims the key).
func (a *attempt) spread(ctx context.Context, told []bool) []bool {
	r := a.r
	on := slices.Clone(told)
	if r.c.quorumFirst {
		return on
	}
	// The script sets the try's value: the hand-off value here.
	try := a.value
	a.value = a.handoff
	defer func() { a.value = try }()
	a.take(ctx, func(i int) bool { return !told[i] && !r.queues(a.home, i) }, false)
	for i, set := range a.set {
		on[i] = on[i] || set
	}
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
// tokens too (see take). Not with WithWait or WithQuorumFirst.
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
	a.take(ctx, func(i int) bool { return a.state[i] == held || a.state[i] == late }, true)
}

// take sets a.value, whatever the key holds (see spread), on the nodes
// for which which(i) holds and that vote, and records their outcomes as a
// try's (record); it waits for those that answer, for a quarter of the
// node timeout at most, and a node whose answer does not come may still
// set the key. Each node runs the acquire script told to take the key,
// which judges there what it judges for any grant (the quarantine's
// marker, a record already there, the max TTL to raise) and, with fencing
// tokens, advances the node's counter: a token that fence counts as any
// granting node's, and a counter advanced leaves at most a gap between
// tokens. Without await, the script is sent and not waited for (see
// spread), and every node it went to may set the key. Not with WithWait.
func (a *attempt) take(ctx context.Context, which func(int) bool, await bool) {
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
		a.state[i], a.set[i], a.cause[i], a.mine[i], a.token[i] = notAsked, false, nil, false, 0
		a.runs[i], a.slow[i] = run, !c.node.answering(now)
		some, awaited = true, awaited || !a.slow[i]
	}
	if !some {
		return
	}
	a.rounds++
	build := func(i int, c *call) {
		c.run = a.runs[i]
		c.buf, c.p.want = a.appendAcquire(c.buf, i, c.run, 0, true), 1
	}
	if !await {
		exchange(context.WithoutCancel(ctx), a.calls, 0, 0, build, func(int, *call) bool { return true })
		for i := range a.calls {
			a.set[i] = !a.calls[i].skip
		}
		return
	}
	wait := r.timeout(a.o.TTL) / 4
	if !awaited {
		wait = 0 // sent, and not waited for
	}
	exchange(context.WithoutCancel(ctx), a.calls, wait, 0, build, func(i int, c *call) bool {
		a.record(i, c)
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
			a.record(i, c)
		}
	}
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
