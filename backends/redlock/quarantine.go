package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Restart quarantine, antirez's "delayed restart" enforced by the clients.
//
// A node that loses its data (it restarted without it, or from an old
// snapshot; it was flushed; its keys were evicted) forgets the locks it
// granted; if it voted at once, a second client could assemble a majority
// for a key that is still held. So a node votes only while its marker
// (markerKey) holds the run_id of the server process running now:
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
//   - a node whose maxmemory-policy may evict lock keys while the marker
//     stays is never admitted.

// probeEvery bounds the time between two probes of a quarantined node.
const probeEvery = time.Second

// adminTimeout bounds each node's answer in Bootstrap and probes, which
// are rare and not on a lease's clock (ctx may bound them further).
const adminTimeout = 2 * time.Second

// ErrInUse is returned (wrapped, with the nodes that are in use) by
// Bootstrap on nodes that have already been admitted, or that a client
// saw in use before they lost their data: Bootstrap then admits nothing,
// and nodes that lost their data serve their quarantine. It wraps
// locker.ErrInvalid.
var ErrInUse = fmt.Errorf("%w: the nodes are already in use by Redlock", locker.ErrInvalid)

// health is a client's view of one node's admission.
type health struct {
	run       string        // the run_id of the server behind the connection
	admitted  bool          // the node's marker admits that process
	known     string        // the run_id this client last had admitted; cleared by a loss
	notBefore time.Time     // this client counts no vote of the node before then
	until     time.Time     // the end of the node's quarantine, as last probed
	why       error         // why the node is not admitted
	probing   bool          // a prober runs
	maxTTL    time.Duration // the max TTL its marker records, as last seen
}

// recorded reports whether the node's marker is known to record a max
// TTL of at least d (always, without the quarantine): a grant by plain
// commands, which do not record it, may then count.
func (n *node) recorded(d time.Duration) bool {
	if !n.r.c.quarantine {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.health.maxTTL >= d
}

// unrecord notes that the node's marker records less than this client's
// max TTL (it was admitted again since).
func (n *node) unrecord() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.health.maxTTL = 0
}

// votes reports whether the node's grants count toward the quorum now,
// and why not; and the run_id of its server process as the last probe
// found it ("" without the quarantine), which a grant passes to the
// acquire script.
func (n *node) votes(now time.Time) (run string, ok bool, why error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := &n.health
	if !n.r.c.quarantine {
		return "", true, nil
	}
	switch {
	case !h.admitted && h.why != nil:
		return h.run, false, h.why
	case !h.admitted && n.main.downErr != nil:
		return h.run, false, n.main.downErr
	case !h.admitted:
		return h.run, false, errors.New("not admitted yet (quarantine)")
	case now.Before(h.notBefore):
		return h.run, false, fmt.Errorf("lost its data: this client counts its vote again at %s", h.notBefore.Format(time.RFC3339Nano))
	}
	return h.run, true, nil
}

// observeLocked updates the node's health from a probe's answer (see
// probe.lua) read at now, and starts the prober if the node is not
// admitted.
func (n *node) observeLocked(answer string, now time.Time) {
	h := &n.health
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
		h.maxTTL = parseMS(arg)
		n.r.sawAdmitted(h.maxTTL)
	case "quarantined":
		if h.admitted || h.known != "" {
			n.lostLocked(now)
		}
		left := time.Duration(0)
		if len(f) > 3 {
			left = parseMS(f[3])
		}
		n.r.recordMaxTTL(parseMS(arg))
		h.run, h.admitted, h.maxTTL = run, false, 0
		h.until = now.Add(left)
		h.why = fmt.Errorf("lost its data or restarted: quarantined until %s", h.until.Format(time.RFC3339Nano))
		n.proberLocked()
	case "evicts":
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
	}
	h.admitted, h.maxTTL = false, 0
	h.why = errors.New("lost its data or restarted (no marker for this process): quarantined")
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
// uses, even one that took its leases after this client last looked.
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
		n.r.readMaxTTLs(n.ctx)
		req := n.r.probeRequest("admit")
		exchange(n.ctx, calls, adminTimeout, 0, func(_ int, c *call) {
			c.req, c.p.want = req, 1
		}, nil)
		c := &calls[0]
		now := time.Now()
		n.mu.Lock()
		next := probeEvery
		if c.err == nil && c.rep[0].err() == nil {
			n.observeLocked(c.rep[0].s, now)
			if n.health.admitted {
				n.health.probing = false
				n.mu.Unlock()
				return
			}
			if left := n.health.until.Sub(now); left > 0 && left < next {
				next = left
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
	return appendCommand(nil, "EVALSHA", probeScript.sha, "2", markerKey, lostKey,
		strconv.FormatInt(r.quarantineFor().Milliseconds(), 10), prior, mode)
}

// readMaxTTLs raises the largest max TTL this client knows of to those
// recorded on the nodes' markers.
func (r *Redlock) readMaxTTLs(ctx context.Context) {
	calls := r.newCalls()
	req := appendCommand(nil, "GET", markerKey)
	exchange(ctx, calls, adminTimeout, 0, func(_ int, c *call) { c.req, c.p.want = req, 1 }, nil)
	for i := range calls {
		if c := &calls[i]; c.err == nil && c.rep[0].kind == '$' {
			if _, ms, ok := strings.Cut(c.rep[0].s, " "); ok {
				r.recordMaxTTL(parseMS(ms))
			}
		}
	}
}

// quarantineFor is how long a node that lost its data stays out: the
// largest max TTL this client knows of, its own or one recorded on a node.
func (r *Redlock) quarantineFor() time.Duration {
	return max(r.c.maxTTL, time.Duration(r.clusterMaxTTL.Load()))
}

// sawAdmitted records that a node admits its process, with the max TTL
// recorded there.
func (r *Redlock) sawAdmitted(maxTTL time.Duration) {
	r.seenAdmitted.Store(true)
	r.recordMaxTTL(maxTTL)
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

// Bootstrap admits brand-new nodes into the quorum at once, instead of
// letting each serve one max TTL of quarantine after a client first finds
// it. It is for whoever creates the nodes, once, before any client takes
// a lock: a node that may have held keys must not be admitted early, and
// Bootstrap cannot tell a node that restarted empty from a new one. So it
// admits nothing, and returns an error wrapping ErrInUse that names them,
// when any reachable node already carries an admission marker, or a
// record of a loss seen by a client that had used the nodes: calling it
// at every start-up is then harmless, but never useful. (What it cannot
// see: every node lost its data at once and no client has probed them
// since. Then the nodes look new.) It returns the joined errors of the
// nodes it could not reach or that may evict lock keys (maxmemory-policy).
func (r *Redlock) Bootstrap(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.ops.Done()
	r.ready(ctx, true)
	answers, errs := r.bootstrapRound(ctx, "check", nil)
	var inUse []error
	free := make([]bool, len(r.nodes))
	for i, a := range answers {
		switch {
		case strings.HasPrefix(a, "in-use "):
			inUse = append(inUse, &locker.NodeError{Node: r.nodes[i].addr, Err: fmt.Errorf("in use (%s)", a)})
		case strings.HasPrefix(a, "free "):
			free[i] = true
		}
	}
	if len(inUse) > 0 {
		return fmt.Errorf("bootstrap: %w: %w", ErrInUse, errors.Join(inUse...))
	}
	answers, more := r.bootstrapRound(ctx, "admit", free)
	errs = append(errs, more...)
	for i, a := range answers {
		if strings.HasPrefix(a, "in-use ") {
			errs = append(errs, &locker.NodeError{Node: r.nodes[i].addr, Err: fmt.Errorf("%w: %s", ErrInUse, a)})
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bootstrap: %w", errors.Join(errs...))
	}
	return nil
}

// bootstrapRound runs the bootstrap script in mode on the nodes (those
// marked in only, when only is not nil) and returns each one's answer,
// and the errors of the nodes that did not give one.
func (r *Redlock) bootstrapRound(ctx context.Context, mode string, only []bool) ([]string, []error) {
	calls := r.newCalls()
	for i := range calls {
		calls[i].skip = only != nil && !only[i]
	}
	req := appendCommand(nil, "EVALSHA", bootstrapScript.sha, "2", markerKey, lostKey, mode)
	exchange(ctx, calls, adminTimeout, 0, func(_ int, c *call) { c.req, c.p.want = req, 1 }, nil)
	answers := make([]string, len(calls))
	var errs []error
	now := time.Now()
	for i := range calls {
		c := &calls[i]
		if c.skip {
			continue
		}
		if c.err == nil {
			c.err = c.rep[0].err()
		}
		if c.err != nil {
			errs = append(errs, c.nodeErr())
			continue
		}
		answers[i] = c.rep[0].s
		if strings.HasPrefix(answers[i], "evicts ") || strings.HasPrefix(answers[i], "admitted ") {
			c.node.mu.Lock()
			c.node.observeLocked(answers[i], now)
			why := c.node.health.why
			c.node.mu.Unlock()
			if why != nil {
				errs = append(errs, &locker.NodeError{Node: c.node.addr, Err: why})
			}
		}
	}
	return answers, errs
}
