package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Restart quarantine, antirez's "delayed restart" enforced by the clients.
//
// A node that loses its data (it restarted without it, or from an old
// snapshot; it was flushed; its keys were evicted) forgets the locks it
// granted; if it voted at once, a second client could assemble a majority
// for a key that is still held. So a node votes only while its marker
// (markerField of nodeKey) holds the run_id of the server process
// running now, and that process has evicted no key since it was admitted:
//
//   - every new connection runs the probe script (probe.lua), which reads
//     the run_id inside the server and compares it with the marker, so a
//     restart is seen by the first request on the new connection, whatever
//     data the server reloaded;
//   - every grant passes that run_id to the acquire script, which refuses
//     (-2) on a node whose marker is gone or names another process;
//   - a node found not admitted is quarantined from the moment the loss is
//     detected: the probe records that moment on the node (lostKey, in the
//     node's own clock, the one that expires its keys), and admits the node
//     when it has served the quarantine since. The quarantine lasts the
//     largest max TTL recorded by the clients of the node (each grant
//     records its client's), so every lock the node may have forgotten has
//     expired by then;
//   - a client that had the node admitted and sees it lose its data counts
//     none of its votes for one quarantine from then, whatever the marker
//     says later (another client, Bootstrap);
//   - a node whose maxmemory-policy may evict lock keys is not admitted
//     (the probe reads the policy first); one that evicted keys after its
//     admission (the policy changed at run time) loses its marker as soon
//     as a client finds a lock key gone before the expiry recorded for it,
//     or probes it, and serves a quarantine once the policy allows;
//   - a node is admitted once it has served its quarantine only by a
//     client that has read the max TTLs recorded on every node, or on a
//     quorum of admitted nodes: a client that cannot read them (the nodes
//     that kept them are out of reach) would time the quarantine by its
//     own max TTL only.

// probeEvery bounds the time between two probes of a quarantined node.
const probeEvery = time.Second

// adminTimeout bounds each node's answer in Bootstrap and probes, which
// are rare and not on a lease's clock (ctx may bound them further).
const adminTimeout = 2 * time.Second

// ErrInUse is returned (wrapped, with the nodes that are in use) by
// Bootstrap on nodes that have already been admitted, or that a client
// saw in use before they lost their data: Bootstrap then admits nothing,
// and nodes that lost their data serve their quarantine. It is a state of
// the nodes, not a bad argument.
var ErrInUse = errors.New("redlock: the nodes are already in use")

// ErrMaybeInUse is returned (wrapped, with the nodes concerned) by
// Bootstrap on nodes that carry no trace of use but may have held locks
// all the same: their server has been up for less than the max TTL (it
// may have restarted empty while a lock was held), or was flushed. Nodes
// that lost their data that way look new, and only whoever created them
// knows they are: Bootstrap(ctx, Force()) admits them.
var ErrMaybeInUse = errors.New("redlock: the nodes may have held locks within the max TTL (young or flushed)")

// health is a client's view of one node's admission.
type health struct {
	run       string    // the run_id of the server behind the connection
	admitted  bool      // the node's marker admits that process
	known     string    // the run_id this client last had admitted; cleared by a loss
	notBefore time.Time // this client counts no vote of the node before then
	until     time.Time // the end of the node's quarantine, as last probed
	why       error     // why the node is not admitted
	asked     uint64    // the place (node.queued) of the request behind the newest answer observed
	probing   bool      // a prober runs
}

// votes reports whether the node's grants count toward the quorum now,
// and why not; and the run_id of its server process as the last probe
// found it ("" without the quarantine), which a grant passes to the
// acquire script.
func (n *node) votes(now time.Time) (run string, ok bool, why error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := &n.health
	if err := n.twin.get(); err != nil {
		return h.run, false, err
	}
	if !n.r.c.quarantine {
		if !n.main.dialled {
			// Not before its first connection told which server it is.
			return "", false, errConnecting
		}
		return "", true, nil
	}
	switch {
	case !h.admitted && h.why != nil:
		return h.run, false, h.why
	case !h.admitted && n.main.downErr != nil:
		return h.run, false, n.main.downErr
	case !h.admitted:
		return h.run, false, errNotAdmitted
	case now.Before(h.notBefore):
		return h.run, false, fmt.Errorf("lost its data: this client counts its vote again at %s", h.notBefore.Format(time.RFC3339Nano))
	}
	return h.run, true, nil
}

// observeLocked updates the node's health from a probe's answer (see
// probe.lua) read at now, to the request queued asked-th on the node (see
// node.queued), and starts the prober if the node is not admitted. An
// answer to a request queued before that of an answer already observed
// is dropped: the node's connections are read each by its own goroutine,
// and the probe of a connection dialled before Bootstrap, answered after
// it, would otherwise take the admission back and keep the node out for
// a quarantine. A loss such an answer would have told is told again by
// every later request (each grant checks the marker).
func (n *node) observeLocked(answer string, asked uint64, now time.Time) {
	h := &n.health
	if asked < h.asked {
		return
	}
	h.asked = asked
	f := strings.Fields(answer)
	if len(f) < 3 {
		h.admitted, h.why = false, errProtocolf("quarantine probe answered %q", answer)
		n.proberLocked()
		return
	}
	run, arg := f[1], f[2]
	switch f[0] {
	case "admitted":
		if h.known != "" && h.known != run {
			// The server restarted since this client had it admitted,
			// and someone admitted the new process already.
			n.lostLocked(now)
		}
		h.run, h.admitted, h.known, h.why = run, true, run, nil
		n.r.sawAdmitted(parseMS(arg))
	case "quarantined":
		if h.admitted || h.known != "" {
			n.lostLocked(now)
			n.r.event(eventQuarantined, n.addr, nil)
		}
		left := time.Duration(0)
		if len(f) > 3 {
			left = parseMS(f[3])
		}
		n.r.recordMaxTTL(parseMS(arg))
		h.run, h.admitted = run, false
		h.until = now.Add(left)
		if len(f) > 4 && f[4] != "1" {
			// No client that probed it had seen these nodes in use: new
			// nodes, most likely, that nobody admitted.
			h.why = fmt.Errorf("not admitted: new nodes are admitted once by Bootstrap (redlock.(*Redlock).Bootstrap, or lockbench redlock "+
				"bootstrap --addrs ...) where they are created; left alone, or if it lost its data, it votes from %s", h.until.Format(time.RFC3339Nano))
		} else {
			h.why = fmt.Errorf("lost its data, restarted or evicted keys: quarantined until %s", h.until.Format(time.RFC3339Nano))
		}
		n.proberLocked()
	case "evicts":
		if h.admitted || h.why == nil || !strings.Contains(h.why.Error(), "maxmemory-policy") {
			n.r.event(eventEvicts, n.addr, nil, slog.String("policy", arg))
		}
		h.run, h.admitted = run, false
		h.why = fmt.Errorf("maxmemory-policy %s may evict lock keys while the node keeps voting: it must be noeviction (or maxmemory 0)", arg)
		n.proberLocked()
	default:
		h.admitted, h.why = false, errProtocolf("quarantine probe answered %q", answer)
		n.proberLocked()
	}
}

// lostLocked records that this client saw the node lose its data at now:
// it counts none of its votes for one quarantine from then.
func (n *node) lostLocked(now time.Time) {
	h := &n.health
	if until := now.Add(n.r.quarantineFor()); until.After(h.notBefore) {
		h.notBefore = until
	}
	h.known = ""
}

// suspect handles the acquire script's -2: the marker is gone or names
// another process. The node is out until a probe admits it again.
func (n *node) suspect(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := &n.health
	if h.admitted || h.known != "" {
		n.lostLocked(now)
		n.r.event(eventQuarantined, n.addr, nil)
	}
	h.admitted = false
	h.why = errLost
	n.proberLocked()
}

// proberLocked starts, unless one runs, the goroutine that probes the
// node until it is admitted.
func (n *node) proberLocked() {
	if n.health.probing || n.closed {
		return
	}
	n.health.probing = true
	n.bg.Add(1)
	go n.probe()
}

// probe runs the probe script on the node, at once and then every
// probeEvery or when its quarantine ends, until the node is admitted.
// Before each probe it reads the max TTLs recorded on every node, so that
// the quarantine it asks for is the largest any client of the nodes
// uses, even one that took its leases after this client last looked; and
// it admits the node only if it could read them where they cannot all
// have been lost (see readMaxTTLs).
func (n *node) probe() {
	defer n.bg.Done()
	calls := []call{{node: n}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-timer.C:
		}
		mode, unread := "admit", n.r.readMaxTTLs(n.ctx)
		if unread != nil {
			mode = "look"
		}
		req := n.r.probeRequest(mode)
		exchange(n.ctx, calls, adminTimeout, 0, func(_ int, c *call) {
			c.req, c.p.want = req, 1
		}, nil)
		c := &calls[0]
		now := time.Now()
		n.mu.Lock()
		next := probeEvery
		if c.err == nil && c.rep[0].err() == nil {
			n.observeLocked(c.rep[0].s, c.p.queued, now)
			if n.health.admitted {
				n.health.probing = false
				n.mu.Unlock()
				n.r.event(eventAdmitted, n.addr, nil)
				return
			}
			if left := n.health.until.Sub(now); left > 0 && left < next {
				next = left
			} else if left <= 0 && unread != nil {
				n.health.why = fmt.Errorf("%w; it has served its quarantine, but %w", n.health.why, unread)
			}
		}
		n.mu.Unlock()
		timer.Reset(next)
	}
}

// probeRequest is the probe script's EVALSHA with this client's
// quarantine length; mode is "admit" or "look" (see probe.lua).
func (r *Redlock) probeRequest(mode string) []byte {
	prior := "0"
	if r.seenAdmitted.Load() {
		prior = "1"
	}
	return appendCommand(nil, "EVALSHA", probeScript.sha, "2", r.k.node, r.k.lost,
		strconv.FormatInt(r.quarantineFor().Milliseconds(), 10), prior, mode)
}

// readMaxTTLs raises the largest max TTL this client knows of to those
// recorded on the nodes: on their markers, and on the records of the
// losses clients detected (the quarantine each asked for). It returns nil
// if what it read can be trusted to include the max TTL of every client
// that may hold a lock on a node that lost its data — every node
// answered, or a quorum of nodes whose marker admits their server process
// did (every grant recorded its client's max TTL on a quorum, and two
// quorums share a node) — and otherwise why not.
func (r *Redlock) readMaxTTLs(ctx context.Context) error {
	calls := r.newCalls()
	var req []byte
	req = appendCommand(req, "HGET", r.k.node, r.k.marker)
	req = appendCommand(req, "HGET", r.k.lost, "q")
	exchange(ctx, calls, adminTimeout, 0, func(_ int, c *call) { c.req, c.p.want = req, 2 }, nil)
	answered, intact := 0, 0
	for i := range calls {
		c := &calls[i]
		if c.err != nil || c.rep[0].err() != nil || c.rep[1].err() != nil {
			continue
		}
		answered++
		if f := strings.Fields(c.rep[0].s); len(f) >= 2 {
			r.recordMaxTTL(parseMS(f[1]))
			c.node.mu.Lock()
			if f[0] == c.node.health.run && c.node.health.admitted {
				intact++
			}
			c.node.mu.Unlock()
		}
		if c.rep[1].kind == '$' {
			r.recordMaxTTL(parseMS(c.rep[1].s))
		}
	}
	if answered == len(r.nodes) || intact >= r.quorum {
		return nil
	}
	return fmt.Errorf("this client read the max TTLs recorded on %d of %d nodes (%d of them admitted): too few to know how long the "+
		"quarantine must be, so it admits nothing until more answer", answered, len(r.nodes), intact)
}

// quarantineFor is how long a node that lost its data stays out: the
// largest max TTL this client knows of, its own or one recorded on a node.
func (r *Redlock) quarantineFor() time.Duration {
	return max(r.c.maxTTL, time.Duration(r.clusterMaxTTL.Load()))
}

// sawAdmitted records that a node admits its process, with the max TTL
// recorded there. While this client's Bootstrap runs, an admitted node
// may be one it has just admitted: that says nothing of the nodes' past,
// and if it made this client's probes of the nodes not admitted yet say
// that it had seen the nodes in use, Bootstrap's next admissions would
// find them "in use" (probe.lua records it) and refuse brand-new nodes.
// So it counts only once Bootstrap has returned (endBootstrap).
func (r *Redlock) sawAdmitted(maxTTL time.Duration) {
	r.recordMaxTTL(maxTTL)
	if r.bootstrapping.Load() > 0 {
		r.admittedByBootstrap.Store(true)
		return
	}
	r.seenAdmitted.Store(true)
}

// beginBootstrap and endBootstrap bracket a Bootstrap (see sawAdmitted).
func (r *Redlock) beginBootstrap() { r.bootstrapping.Add(1) }

func (r *Redlock) endBootstrap() {
	if r.bootstrapping.Add(-1) == 0 && r.admittedByBootstrap.Swap(false) {
		r.seenAdmitted.Store(true)
	}
}

// recordMaxTTL raises the largest max TTL this client knows of.
func (r *Redlock) recordMaxTTL(d time.Duration) {
	for {
		cur := r.clusterMaxTTL.Load()
		if int64(d) <= cur || r.clusterMaxTTL.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

func parseMS(s string) time.Duration {
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || ms < 0 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}
