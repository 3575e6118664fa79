package compose

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockbench/lockbench/internal/server"
)

// ErrExited is wrapped by the error of a start (Node.Start, StartAll)
// whose server process exited before it was ready: the server refused to
// run — its data (etcd refusing a torn WAL, a PostgreSQL PANIC on a
// missing control file), its config, its port. The error carries the last
// lines of the server's log, which say why. It is server.ErrExited, which
// a fault tests for without importing compose.
var ErrExited = server.ErrExited

// ErrNotReady is wrapped, beside the context's error, by the error of a
// start whose server still ran when the wait for it ended (ReadyTimeout,
// or the caller's context): it was slow — a loaded machine, a log to
// replay — or its readiness could not be seen (its clients cut off). The
// harness gave up on it; the server refused nothing. It is
// server.ErrNotReady.
var ErrNotReady = server.ErrNotReady

// Poll calls check every 50 ms until it returns nil, ctx ends or d passes;
// the error then wraps ctx's and includes check's last error. Each check
// gets 3 s. A kind waits with it for what a node's readiness does not
// cover (a set's replication, its sentinels' agreement).
func Poll(ctx context.Context, d time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 3*time.Second)
		last := check(probeCtx)
		probeCancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// WithDefaultTimeout bounds ctx by d unless it already has a deadline:
// the wait of a cluster's control whose caller gave none.
func WithDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// AwaitLeader polls leader until a node other than old (which may be
// nil) leads, and returns it; what names the cluster's kind in the error.
// ctx bounds the wait; without a deadline it is one minute.
func AwaitLeader(ctx context.Context, what string, leader func(context.Context) (*Node, error), old *Node) (*Node, error) {
	ctx, cancel := WithDefaultTimeout(ctx, time.Minute)
	defer cancel()
	var found *Node
	err := Poll(ctx, time.Minute, func(ctx context.Context) error {
		l, err := leader(ctx)
		if err != nil {
			return err
		}
		if l == old {
			return fmt.Errorf("%s still leads", l.Name)
		}
		found = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("compose: no new %s leader: %w", what, err)
	}
	return found, nil
}

// LeaderOf asks every node at once, each within a second, whether it
// leads (and in which term), and returns the leader of the highest term:
// a leader cut off from its followers says it leads until it notices.
// Nodes that do not answer — killed or paused — are skipped; the error
// joins their errors when none leads.
func LeaderOf(ctx context.Context, nodes []*Node, leads func(ctx context.Context, i int) (bool, uint64, error)) (*Node, error) {
	type answer struct {
		leads bool
		term  uint64
		err   error
	}
	answers := make([]answer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			probe, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			a := &answers[i]
			a.leads, a.term, a.err = leads(probe, i)
			if a.err != nil {
				a.err = fmt.Errorf("%s: %w", n.Name, a.err)
			}
		})
	}
	wg.Wait()
	var (
		leader *Node
		term   uint64
		errs   []error
	)
	for i, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
		} else if a.leads && (leader == nil || a.term > term) {
			leader, term = nodes[i], a.term
		}
	}
	if leader == nil {
		if len(errs) == 0 {
			return nil, errors.New("no member leads")
		}
		return nil, errors.Join(errs...)
	}
	return leader, nil
}
