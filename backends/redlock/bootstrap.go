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

// BootstrapOption changes what Bootstrap admits.
type BootstrapOption func(*bootstrapOptions)

type bootstrapOptions struct {
	force bool
}

// Force makes Bootstrap admit nodes that carry no trace of use but whose
// server has been up for less than the max TTL, or was flushed: nodes
// you have just created. It is what a brand-new cluster needs, and what
// its creator alone can say. The risk: if those nodes are not new but
// lost their data (every one of them restarted empty, or was flushed,
// while a client held a lock, and no client has probed them since), a
// forced Bootstrap admits them at once and the lock can be granted to a
// second client while the first one's lease is valid. Force never admits
// nodes in use (ErrInUse).
func Force() BootstrapOption {
	return func(o *bootstrapOptions) { o.force = true }
}

// Bootstrap admits brand-new nodes into the quorum at once: until then a
// node that no client has admitted does not vote, and a node left alone
// is admitted one max TTL after a client first finds it. New nodes cannot
// be told from nodes that lost their data, so the first contact with a
// cluster must be this explicit step, taken once by whoever creates the
// nodes (or `lockbench redlock bootstrap --addrs ...`), before any client
// takes a lock.
//
// Bootstrap admits nothing, and returns an error wrapping ErrInUse that
// names the nodes, when any reachable node carries Redlock's state (an
// admission marker, records of grants) or a record of a loss seen by a
// client that had used the nodes: calling it at every start-up is then
// harmless, but never useful. It admits nothing either, and returns an
// error wrapping ErrMaybeInUse, when a node's server has been up for less
// than this Redlock's max TTL or was flushed (FLUSHALL, FLUSHDB), unless
// Force is given: such a node may have restarted empty, or been flushed,
// while a lock was held, and Bootstrap cannot see the difference. What it
// still cannot see: every node lost its data without a restart or a flush
// that INFO records (CONFIG RESETSTAT then FLUSHALL, or the keys deleted
// one by one) while no client probed them. It returns the joined errors
// of the nodes it could not reach or that may evict lock keys
// (maxmemory-policy).
func (r *Redlock) Bootstrap(ctx context.Context, opts ...BootstrapOption) error {
	var o bootstrapOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := r.begin(); err != nil {
		return err
	}
	defer r.ops.Done()
	ctx, span := r.tel.start(ctx, "redlock.Bootstrap")
	r.beginBootstrap()
	err := r.bootstrap(ctx, o)
	r.endBootstrap()
	r.tel.end(span, err)
	if err == nil {
		r.event(eventBootstrapped, "", nil)
	}
	return err
}

func (r *Redlock) bootstrap(ctx context.Context, o bootstrapOptions) error {
	r.ready(ctx, true)
	answers, errs := r.bootstrapRound(ctx, "check", nil, o)
	var inUse, maybe []error
	free := make([]bool, len(r.nodes))
	for i, a := range answers {
		kind, rest, _ := strings.Cut(a, " ")
		node := r.nodes[i].addr
		switch kind {
		case "in-use":
			inUse = append(inUse, &locker.NodeError{Node: node, Err: fmt.Errorf("in use (%s)", rest)})
		case "young":
			_, up, _ := strings.Cut(rest, " ")
			maybe = append(maybe, &locker.NodeError{Node: node, Err: fmt.Errorf("its server has been up for %ss, less than the max "+
				"TTL %v", up, r.c.maxTTL)})
		case "flushed":
			maybe = append(maybe, &locker.NodeError{Node: node, Err: errors.New("its server was flushed (FLUSHALL or FLUSHDB)")})
		case "free":
			free[i] = true
		}
	}
	if len(inUse) > 0 {
		return fmt.Errorf("bootstrap: %w: %w", ErrInUse, errors.Join(inUse...))
	}
	if len(maybe) > 0 {
		return fmt.Errorf("bootstrap: %w (if you have just created them, Bootstrap with Force, or lockbench redlock bootstrap --force): "+
			"%w", ErrMaybeInUse, errors.Join(maybe...))
	}
	answers, more := r.bootstrapRound(ctx, "admit", free, o)
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
func (r *Redlock) bootstrapRound(ctx context.Context, mode string, only []bool, o bootstrapOptions) ([]string, []error) {
	calls := r.newCalls()
	for i := range calls {
		calls[i].skip = only != nil && !only[i]
	}
	ms := strconv.FormatInt(r.c.maxTTL.Milliseconds(), 10)
	// The marker records no max TTL yet: the clients that take leases
	// record theirs.
	req := appendCommand(nil, "EVALSHA", bootstrapScript.sha, "2", r.k.node, r.k.lost, mode, ms, flag(o.force), "0")
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
			if err := c.rep[0].err(); err != nil {
				c.err = explain("the bootstrap script", err)
			}
		}
		if c.err != nil {
			errs = append(errs, c.nodeErr())
			continue
		}
		answers[i] = c.rep[0].s
		if strings.HasPrefix(answers[i], "evicts ") || strings.HasPrefix(answers[i], "admitted ") {
			c.node.mu.Lock()
			c.node.observeLocked(answers[i], c.p.queued, now)
			why := c.node.health.why
			c.node.mu.Unlock()
			if why != nil {
				errs = append(errs, &locker.NodeError{Node: c.node.addr, Err: why})
			}
		}
	}
	return answers, errs
}
