package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/locker"
)

// Acquire implements locker.Locker. It queues: after each check that finds
// another znode first, the retry strategy is asked whether to go on (so
// NoRetry and LimitRetry bound the wait), but its backoff is not slept —
// the watch on the predecessor wakes the waiter when it may be first. The
// backoff paces retries after connection errors only.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, true, opts)
}

// TryAcquire implements locker.Locker: one create and one check; a znode
// that is not first is deleted before it returns ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, false, opts)
}

// queue is one acquisition in progress: its znode, if it has one.
type queue struct {
	l       *Locker
	key     string
	parent  string
	node    string // full path of our znode, "" while we have none
	seq     int64
	session int64
	// alone reports that the last check found exactly one znode below
	// ours. Znodes created later sort after ours, so once that one is
	// deleted ours is first without listing the queue again: a hand-off
	// costs the waiter no extra round trip.
	alone bool
}

func (l *Locker) acquire(ctx context.Context, key string, wait bool, opts []locker.Option) (locker.Lease, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return nil, err
	}
	if l.closing.Err() != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, locker.ErrClosed)
	}
	if err := l.ready(ctx); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	q := &queue{l: l, key: key, parent: l.root + "/" + escape(key)}
	lease, err := q.run(ctx, o, wait)
	if q.node != "" {
		q.drop(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	return lease, nil
}

// run is the acquisition loop.
func (q *queue) run(ctx context.Context, o locker.Options, wait bool) (locker.Lease, error) {
	l := q.l
	var (
		last  error     // why the previous attempt did not succeed
		first time.Time // when the predecessor went, if that made ours first
	)
	for n := 1; ; n++ {
		lease, pred, err := q.attempt(ctx, o, first)
		first = time.Time{}
		switch {
		case err == nil && lease != nil:
			return lease, nil
		case err == nil: // another znode is first
			last = fmt.Errorf("%w: %s is first", locker.ErrNotAcquired, pred)
			if !wait {
				return nil, last
			}
			if _, ok := o.Retry.Backoff(n); !ok {
				return nil, last
			}
			if first, err = q.await(ctx, pred); err != nil {
				return nil, withLast(err, last)
			}
			continue
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return nil, withLast(err, last)
		case l.closing.Err() != nil || errors.Is(err, zk.ErrClosing):
			return nil, locker.ErrClosed
		case !transient(err) && !errors.Is(err, zk.ErrSessionExpired):
			return nil, err
		}
		// The connection's trouble: wait as the strategy says and retry.
		last = err
		d, ok := o.Retry.Backoff(n)
		if !wait || !ok {
			return nil, err
		}
		t := time.NewTimer(max(d, locker.MinBackoff))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, withLast(ctx.Err(), last)
		case <-l.closing.Context().Done():
			t.Stop()
			return nil, locker.ErrClosed
		}
	}
}

// withLast reports that ctx ended, keeping the last attempt's error.
func withLast(ctxErr, last error) error {
	if last == nil || errors.Is(last, ctxErr) {
		return ctxErr
	}
	return fmt.Errorf("%w (last attempt: %w)", ctxErr, last)
}

// attempt makes sure we have a znode, then checks the queue, unless first
// is set: the time our znode became first. It returns the lease when ours
// is first, or the name of the znode just before ours.
func (q *queue) attempt(ctx context.Context, o locker.Options, first time.Time) (locker.Lease, string, error) {
	l := q.l
	if id, _ := l.sess.current(); q.node != "" && id != q.session {
		q.forget() // died with its session
	}
	checked := first
	if q.node == "" {
		if err := q.create(ctx); err != nil {
			return nil, "", err
		}
		checked = time.Time{}
	}
	if checked.IsZero() {
		checked = time.Now()
		var children []string
		err := l.call(ctx, func() (err error) {
			children, _, err = l.conn.Children(q.parent)
			return err
		}, nil)
		if err != nil {
			return nil, "", q.rpcErr(err)
		}
		pred, below, present := q.predecessor(children)
		switch {
		case !present:
			// Deleted behind our back, or gone with an expired session.
			node := q.node
			q.forget()
			return nil, "", l.nodeErr(fmt.Errorf("%w: znode %s was deleted while queued", errRequeue, node))
		case pred != "":
			q.alone = below == 1
			return nil, pred, nil
		}
	}
	if q.seq < 0 {
		return nil, "", fmt.Errorf("key %q: ZooKeeper's sequence numbers for %s are used up (2^31 grants): delete the parent to reuse the key, "+
			"knowing that its tokens restart", q.key, q.parent)
	}
	// Ours is first. Grant only with a recent proof that the session is
	// alive on the leader; heartbeats keep one while we wait.
	if _, timeout := l.sess.current(); l.sess.left() < timeout/2 {
		if err := l.heartbeat(ctx); err != nil {
			return nil, "", q.rpcErr(err)
		}
	}
	ls := &lease{l: l, key: q.key, path: q.node, session: q.session}
	g := locker.Grant{Key: q.key, Token: uint64(q.seq), HasToken: true, ValidUntil: checked.Add(o.TTL)}
	if err := l.sess.register(ls, func() *locker.Handle { return locker.NewLease(l.closing.Context(), ls, g, o) }); err != nil {
		return nil, "", err
	}
	q.node = "" // the lease owns the znode now
	l.pending.Add(-1)
	return ls.h, "", nil
}

// rpcErr classifies a failed request: ctx's end and the Locker's closing
// as they are, anything else as the server's failure.
func (q *queue) rpcErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locker.ErrClosed) {
		return err
	}
	return q.l.nodeErr(err)
}

// create makes our znode, creating the key's parent when it is missing,
// and records the session it belongs to.
func (q *queue) create(ctx context.Context) error {
	l := q.l
	for tries := 0; ; tries++ {
		before, _ := l.sess.current()
		sent := time.Now()
		var path string
		err := l.call(ctx, func() (err error) {
			path, err = l.conn.CreateProtectedEphemeralSequential(q.parent+"/lock-", nil, l.acl)
			return err
		}, func() {
			if path != "" {
				l.deleteLater(path, before)
			}
		})
		if errors.Is(err, zk.ErrNoNode) && tries < 3 {
			if err := l.ensure(ctx, q.parent); err != nil {
				return q.rpcErr(err)
			}
			continue
		}
		if err != nil {
			return q.rpcErr(err)
		}
		seq, err := parseSeq(path)
		if err != nil {
			l.deleteLater(path, before)
			return q.rpcErr(err)
		}
		after, _ := l.sess.current()
		if before != after {
			// The create may have gone out on either session: ask the
			// server whose it is.
			var owner int64
			err := l.call(ctx, func() error {
				_, stat, err := l.conn.Exists(path)
				if stat != nil {
					owner = stat.EphemeralOwner
				}
				return err
			}, nil)
			if err != nil || owner != after || after == 0 {
				l.deleteLater(path, after)
				return l.nodeErr(fmt.Errorf("%w: the session changed while %s was created", errRequeue, path))
			}
		} else {
			l.sess.ack(before, sent)
		}
		q.node, q.seq, q.session = path, seq, after
		l.pending.Add(1)
		return nil
	}
}

// ensure creates path and any missing ancestor as persistent znodes.
func (l *Locker) ensure(ctx context.Context, path string) error {
	err := l.call(ctx, func() error {
		_, err := l.conn.Create(path, nil, 0, l.acl)
		return err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		if err := l.ensure(ctx, path[:strings.LastIndexByte(path, '/')]); err != nil {
			return err
		}
		return l.ensure(ctx, path)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

// predecessor returns the child whose sequence is the highest below ours
// ("" when ours is first), how many children are below ours, and whether
// ours is among the children at all. Children that are not lock nodes are
// ignored.
func (q *queue) predecessor(children []string) (pred string, below int, present bool) {
	name := q.node[len(q.parent)+1:]
	best := int64(math.MinInt64)
	for _, c := range children {
		if c == name {
			present = true
			continue
		}
		s, err := parseSeq(c)
		if err != nil || s >= q.seq {
			continue
		}
		below++
		if s > best {
			best, pred = s, q.parent+"/"+c
		}
	}
	return pred, below, present
}

// await waits until pred is deleted, ctx ends or the Locker closes. A
// watch that is dropped (the session expired) also wakes it. It returns
// when ours became first, if it knows (see queue.alone), else zero.
func (q *queue) await(ctx context.Context, pred string) (time.Time, error) {
	l := q.l
	var (
		exists bool
		ch     <-chan zk.Event
	)
	err := l.call(ctx, func() (err error) {
		exists, _, ch, err = l.conn.ExistsW(pred)
		return err
	}, nil)
	if err != nil {
		if transient(err) {
			return time.Time{}, nil // check again once reconnected
		}
		return time.Time{}, q.rpcErr(err)
	}
	if !exists {
		return q.firstIf(true), nil
	}
	select {
	case ev := <-ch:
		return q.firstIf(ev.Type == zk.EventNodeDeleted), nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-l.closing.Context().Done():
		return time.Time{}, locker.ErrClosed
	}
}

// firstIf returns now if the predecessor is gone and was the only znode
// below ours, else zero: the queue must be checked again.
func (q *queue) firstIf(predGone bool) time.Time {
	if predGone && q.alone {
		return time.Now()
	}
	return time.Time{}
}

// drop deletes our znode: at once while ctx allows, so that TryAcquire's
// next caller does not find it first, else in the background.
func (q *queue) drop(ctx context.Context) {
	l := q.l
	path, session := q.node, q.session
	q.forget()
	if ctx.Err() == nil {
		err := l.call(ctx, func() error { return l.conn.Delete(path, -1) }, nil)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return
		}
	}
	l.deleteLater(path, session)
}

// forget drops our hold on the znode without deleting it.
func (q *queue) forget() {
	if q.node != "" {
		q.node = ""
		q.l.pending.Add(-1)
	}
}

// parseSeq returns the sequence number ZooKeeper appended to a lock node
// name ("…lock-0000000042"); negative once the counter has wrapped.
func parseSeq(name string) (int64, error) {
	i := strings.LastIndex(name, "lock-")
	if i < 0 {
		return 0, fmt.Errorf("znode %q is not a lock node", name)
	}
	s, err := strconv.ParseInt(name[i+len("lock-"):], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("znode %q: bad sequence: %w", name, err)
	}
	return s, nil
}

// escape turns a key into one znode name: bytes other than ASCII letters,
// digits and -_.:@,=+ become %XX (so '%' and '/' do), and a name of only
// dots, which ZooKeeper reserves, has its dots escaped. Distinct keys get
// distinct names.
func escape(key string) string {
	var b strings.Builder
	onlyDots := strings.Trim(key, ".") == ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '.' && onlyDots:
			fmt.Fprintf(&b, "%%%02X", c)
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-_.:@,=+", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
