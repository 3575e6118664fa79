package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// An attempt is one Acquire's (or TryAcquire's) state across its tries:
// its per-node outcomes, the nodes a try asks, and the refusal it reports.

// Per-node outcome of one attempt.
const (
	notAsked uint8 = iota
	granted        // the node set the key for us and may vote
	held           // the key has another value there
	excluded       // the node may not vote now (quarantine)
	failed         // unreachable, timed out, or an error reply
	late           // not waited for: a majority had answered
)

// attempt is one Acquire's state across its tries.
type attempt struct {
	r     *Redlock
	key   string
	o     locker.Options
	value string
	start time.Time
	calls []call
	state []uint8
	runs  []string // the run_id each node's grant is for
	token []int64  // the node's token, or how long the key has left there when held
	set   []bool   // we may have set the key there: release it on failure
	mine  []bool   // the lean grant wrote the key's record there (see lean.go)
	full  bool     // the lean try met work for the full script (see lean.go)
	cause []error  // why a node failed or was excluded
	slow  []bool   // the node was not answering when the try began: not waited for
	first []bool   // the nodes a try asks first (see pick)
	spare int      // how many nodes the try may still ask after those
	rest  bool     // a contending try asked a quorum first: after a grant, the others too (see contends)
	home  int      // the first of the key's queue nodes (see handoff.go)

	// queue: the attempt queues on the nodes when the key is held
	// (Acquire, not TryAcquire), as waiter r.id arrived at arrival (µs).
	queue   bool
	arrival string
	handoff string        // the value a release that hands the key to this Acquire sets (handedValue+...)
	queued  bool          // some node queued it: give the place up on failure
	pause   time.Duration // after a refusal: until the key expires on a majority, when queued

	tries    int
	rounds   int // sent to the nodes, for the redlock.acquire.rounds metric
	wake     chan struct{}
	watching bool
}

// newAttempt returns an attempt for key, recycled when possible: its
// buffers then need no allocation.
func (r *Redlock) newAttempt(key string, o locker.Options, queue bool) *attempt {
	a, ok := r.attempts.Get().(*attempt)
	if !ok {
		n := len(r.nodes)
		a = &attempt{
			r: r, calls: r.newCalls(),
			state: make([]uint8, n), runs: make([]string, n), slow: make([]bool, n), first: make([]bool, n), token: make([]int64, n),
			set: make([]bool, n), mine: make([]bool, n),
			cause: make([]error, n), wake: make(chan struct{}, 1),
		}
	}
	a.key, a.o, a.queue, a.queued, a.pause, a.tries, a.rounds = key, o, queue, false, 0, 0, 0
	a.handoff = ""
	a.home = r.home(key)
	if queue {
		a.arrival = strconv.FormatInt(time.Now().UnixMicro(), 10)
	}
	return a
}

// done ends an Acquire's attempt and keeps it for the next one.
func (r *Redlock) done(a *attempt) {
	if a.watching {
		r.handoff.unwatch(a.key)
		a.watching = false
	}
	select { // a wake-up after the last try must not wake the next owner
	case <-a.wake:
	default:
	}
	r.attempts.Put(a)
}

// watch starts delivering the key's wake-ups to the attempt, once.
func (a *attempt) watch() {
	if !a.watching {
		a.watching = true
		a.r.handoff.watch(a.key, a.wake)
	}
}

// begin starts a try: a new value, its clock, and no outcome yet.
func (a *attempt) begin() {
	a.value = newValue()
	if a.queue && a.handoff == "" {
		// Random like a lock value, and unlike any (see handedValue).
		a.handoff = handedValue + a.value
	}
	a.start = a.r.now()
	clear(a.state)
	clear(a.set)
	clear(a.cause)
}

// pick chooses the nodes a try asks first: every node, or a quorum of
// the nodes that vote and answer, the key's queue nodes first (where the
// key is handed over, and where its waiters queue), then the nodes that
// follow them in canonical order — with WithQuorumFirst, and for a try
// that contends (see contends). A grant needs a majority only, and every
// node asked costs a request to run on a server and one to release:
// asking a quorum first makes an uncontended Acquire and Release run 6
// scripts instead of 10, and a contended try, refused by the queue nodes,
// sets the key nowhere and has nothing to release. The other nodes are
// asked when one of the first refuses or fails (spare is how many), and
// after a contending try's grant (rest: see run); with fewer than a
// quorum voting and answering (at start, or with nodes down), every node
// is asked at once. A node on which no acquire script of this Redlock has
// run yet is asked first too, once: the script records the Redlock's max
// TTL on the node, and the restart quarantine needs it on more nodes than
// a quorum (if the nodes that granted a lease all lose their data, the
// others still tell how long to keep them out).
func (a *attempt) pick() {
	r := a.r
	clear(a.first)
	a.spare, a.rest = 0, false
	if r.c.quorumFirst || a.contends() {
		now := time.Now()
		picked, spare := 0, 0
		for k := range r.nodes {
			i := (a.home + k) % len(r.nodes)
			if _, ok, _ := r.nodes[i].votes(now); !ok {
				continue
			}
			switch {
			case picked < r.quorum && r.nodes[i].answering(now):
				a.first[i] = true
				picked++
			case !r.nodes[i].recorded.Load():
				a.first[i] = true
			default:
				spare++
			}
		}
		if picked == r.quorum {
			a.spare, a.rest = spare, !r.c.quorumFirst
			return
		}
	}
	for i := range a.first {
		a.first[i] = true
	}
}

// contends reports whether the try contends for a key that is held: an
// Acquire's try after its first, or one on a key whose lean try or
// release found waiters lately (see hotKeys). Such a try is refused by
// the key's queue nodes as surely as by every node, so it asks them
// first; when they grant it, the key is then taken on the other nodes
// too (see run), and lives on as many nodes as a grant of every node
// asked at once. Not with fencing tokens, whose tries ask every node,
// nor with WithWait, which takes no key over (see takeHeld).
func (a *attempt) contends() bool {
	c := &a.r.c
	return a.queue && !c.fencing && c.waitReplicas == 0 && (a.tries > 1 || a.r.hot.hot(a.key, time.Now()))
}

// driftAllowance is TTL×drift + 2 ms, what validity loses to clock drift.
func (a *attempt) driftAllowance() time.Duration {
	return time.Duration(float64(a.o.TTL)*a.r.c.drift) + 2*time.Millisecond
}

func (a *attempt) count(s uint8) int {
	n := 0
	for _, x := range a.state {
		if x == s {
			n++
		}
	}
	return n
}

// fail releases whatever the try may have set and returns the error that
// explains the refusal, naming each failing node. The release is sent
// and not waited for: the next try's requests follow it on the same
// connections, so the nodes run it first.
func (a *attempt) fail(ctx context.Context, why string) error {
	release := false
	for _, s := range a.set {
		release = release || s
	}
	if release {
		for i := range a.calls {
			a.calls[i].skip = !a.set[i]
			a.calls[i].extra, a.calls[i].slow = 0, false
		}
		a.r.send(ctx, a.calls, a.key, a.value, a.r.reserveFor(a.o.TTL))
	}
	a.pause = a.expiry()
	g, h := a.count(granted), a.count(held)
	if h > 0 {
		a.r.hot.mark(a.key, time.Now())
	}
	if why == "" {
		why = fmt.Sprintf("%d of %d nodes granted, quorum %d", g, len(a.state), a.r.quorum)
		if h > 0 {
			why += fmt.Sprintf("; held by another client on %d", h)
		}
	}
	if err := a.refused(); err != nil {
		return err
	}
	var causes []error
	for _, c := range a.cause {
		if c != nil {
			causes = append(causes, c)
		}
	}
	if len(causes) == 0 {
		return fmt.Errorf("%w: %q: %s", locker.ErrNotAcquired, a.key, why)
	}
	return fmt.Errorf("%w: %q: %s: %w", locker.ErrNotAcquired, a.key, why, errors.Join(causes...))
}

// newValue returns a fresh 128-bit random lock value, hex-encoded.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func flag(on bool) string {
	if on {
		return "1"
	}
	return "0"
}
