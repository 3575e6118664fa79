package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockbench/lockbench/locker"
)

// Acquire implements locker.Locker. It queues: after each check that finds
// another key ahead of its own, the retry strategy is asked whether to go
// on (so NoRetry and LimitRetry bound the wait), but its backoff is not
// slept — the watch on the key just ahead wakes the waiter when it may be
// first. The backoff paces retries after the cluster's errors only.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, true, opts)
}

// TryAcquire implements locker.Locker: one transaction that puts our key
// only if the lock's queue is empty, so a failed attempt leaves nothing
// behind.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	return l.acquire(ctx, key, false, opts)
}

// acquisition is one Acquire or TryAcquire in progress.
type acquisition struct {
	l    *Locker
	key  string
	pfx  string // the lock's queue prefix
	o    locker.Options
	secs int64 // the TTL in whole seconds

	has   bool     // rec is this acquisition's
	rec   leaseRec // its etcd lease
	put   bool     // a put of myKey may have been applied: revoke rec, do not recycle it
	myKey string
	myRev int64 // create revision of myKey; 0 while it is not known to exist
}

func (l *Locker) acquire(ctx context.Context, key string, wait bool, opts []locker.Option) (locker.Lease, error) {
	o, err := locker.Resolve(key, opts...)
	if err != nil {
		return nil, err
	}
	secs, err := ttlSeconds(key, o.TTL)
	if err != nil {
		return nil, err
	}
	if err := l.closing.Add(); err != nil {
		return nil, fmt.Errorf("acquire %q: %w", key, err)
	}
	defer l.closing.Done()
	// Close does not wait on a request made with a ctx that never ends.
	op, stop := l.closing.Bind(ctx)
	defer stop()
	a := &acquisition{l: l, key: key, pfx: l.Prefix(key), o: o, secs: secs}
	lease, err := a.run(op, wait)
	if err != nil {
		a.abandon(ctx)
		return nil, fmt.Errorf("acquire %q: %w", key, l.outcome(ctx, op, err))
	}
	return lease, nil
}

// run is the acquisition loop.
func (a *acquisition) run(ctx context.Context, wait bool) (locker.Lease, error) {
	var last error // why the previous attempt did not succeed
	requeues := 0
	for n := 1; ; n++ {
		lease, pred, err := a.attempt(ctx, wait)
		switch {
		case err == nil && lease != nil:
			return lease, nil
		case err == nil: // another key is ahead of ours
			last = fmt.Errorf("%w: %s is ahead in the queue", locker.ErrNotAcquired, pred.key)
			if _, ok := a.o.Retry.Backoff(n); !ok {
				return nil, last
			}
			err = a.await(ctx, pred)
			switch {
			case err == nil:
				continue
			case ctx.Err() != nil:
				return nil, withLast(ctx.Err(), last)
			case errors.Is(err, errRequeue):
				last = err
				continue
			case !transient(err) && !errors.Is(err, errWatchEnded):
				return nil, err
			}
		case ctx.Err() != nil:
			return nil, withLast(ctx.Err(), last)
		case errors.Is(err, errRequeue) && requeues < 3:
			// Our key or lease vanished (a pooled lease that expired,
			// a lease revoked while we waited): queue again at once.
			requeues++
			last = err
			continue
		case !wait || !transient(err):
			return nil, err
		}
		// The cluster's trouble: wait as the strategy says and retry.
		last = err
		d, ok := a.o.Retry.Backoff(n)
		if !ok {
			return nil, err
		}
		if !sleep(ctx, max(d, locker.MinBackoff)) {
			return nil, withLast(ctx.Err(), last)
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

// ahead is the key just ahead of ours in the queue.
type ahead struct {
	key     string
	created int64 // its create revision
	seen    int64 // the revision of the read that saw it
}

// aheadOf returns the queue key kv, seen at revision rev.
func aheadOf(kv *mvccpb.KeyValue, rev int64) ahead {
	return ahead{key: string(kv.Key), created: kv.CreateRevision, seen: rev}
}

// attempt makes sure we have a lease and a key in the queue, then checks
// the queue. It returns the lease when our key is first, or the key just
// ahead of ours.
func (a *acquisition) attempt(ctx context.Context, wait bool) (locker.Lease, ahead, error) {
	if !a.has {
		rec, err := a.l.takeLease(ctx, a.secs)
		if err != nil {
			return nil, ahead{}, err
		}
		a.rec, a.has, a.put, a.myRev = rec, true, false, 0
		a.myKey = fmt.Sprintf("%s%016x", a.pfx, int64(rec.id))
	}
	if a.myRev == 0 {
		return a.enqueue(ctx, wait)
	}
	return a.check(ctx)
}

// enqueue puts our key, attached to our lease, in one transaction with
// the read that tells whether it is first: the two newest keys of the
// queue (ours and the one just ahead) for Acquire; for TryAcquire the put
// happens only if the queue is empty.
func (a *acquisition) enqueue(ctx context.Context, wait bool) (locker.Lease, ahead, error) {
	l := a.l
	put := clientv3.OpPut(a.myKey, "", clientv3.WithLease(a.rec.id))
	txn := l.cli.Txn(ctx)
	if wait {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(a.myKey), "=", 0)).
			Then(put, clientv3.OpGet(a.pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))).
			Else(clientv3.OpGet(a.myKey, clientv3.WithKeysOnly()))
	} else {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(a.pfx), "=", 0).WithPrefix()).
			Then(put).
			Else(clientv3.OpGet(a.pfx, append(clientv3.WithFirstCreate(), clientv3.WithKeysOnly())...))
	}
	a.put = true
	resp, err := txn.Commit()
	switch {
	case leaseGone(err):
		l.disown(a.rec.id)
		a.has, a.put = false, false
		return nil, ahead{}, fmt.Errorf("%w: lease %x expired before its key was put", errRequeue, int64(a.rec.id))
	case err != nil:
		return nil, ahead{}, err
	}
	rev := resp.Header.Revision
	switch {
	case resp.Succeeded && !wait:
		a.myRev = rev
		return a.granted(ctx, rev)
	case resp.Succeeded:
		a.myRev = rev
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 1 {
			return nil, aheadOf(kvs[1], rev), nil
		}
		return a.granted(ctx, rev)
	case !wait:
		// Nothing was put: the lease is as good as new.
		a.put, a.has = false, false
		a.l.recycle(a.rec)
		holder := "another key"
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = fmt.Sprintf("%s (token %d)", kvs[0].Key, kvs[0].CreateRevision)
		}
		return nil, ahead{}, fmt.Errorf("%w: %s holds it", locker.ErrNotAcquired, holder)
	}
	// Our key exists already: an earlier put whose answer was lost.
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, ahead{}, fmt.Errorf("%w: key %s vanished during the transaction", errRequeue, a.myKey)
	}
	a.myRev = kvs[0].CreateRevision
	return a.check(ctx)
}

// check reads the queue up to our key: our key must still be there, and
// the key just ahead of it, if any, is the one to wait for.
func (a *acquisition) check(ctx context.Context) (locker.Lease, ahead, error) {
	resp, err := a.l.cli.Get(ctx, a.pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2),
		clientv3.WithMaxCreateRev(a.myRev), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))
	if err != nil {
		return nil, ahead{}, err
	}
	kvs := resp.Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != a.myRev {
		// Deleted behind our back, or gone with its lease.
		a.dropLease()
		return nil, ahead{}, fmt.Errorf("%w: key %s was deleted while queued", errRequeue, a.myKey)
	}
	if len(kvs) > 1 {
		return nil, aheadOf(kvs[1], resp.Header.Revision), nil
	}
	return a.granted(ctx, resp.Header.Revision)
}

// dropLease gives up our lease and key (revoking the lease), so that the
// next attempt queues afresh.
func (a *acquisition) dropLease() {
	if a.has {
		a.l.revokeLater(a.rec.id)
	}
	a.has, a.put, a.myRev = false, false, 0
}

// granted turns our first key, seen first at revision rev, into a lease.
// A lease last renewed more than a tenth of its TTL ago is renewed first.
func (a *acquisition) granted(ctx context.Context, rev int64) (locker.Lease, ahead, error) {
	l := a.l
	if !a.rec.fresh() {
		if err := a.refresh(ctx); err != nil {
			return nil, ahead{}, err
		}
	}
	ls := &lease{l: l, key: a.key, path: a.myKey, rev: a.myRev, rec: a.rec}
	g := locker.Grant{Key: a.key, Token: uint64(a.myRev), HasToken: true, ValidUntil: a.rec.deadline()}
	if !l.register(ls, func() *locker.Handle { return locker.NewLease(l.closing.Context(), ls, g, a.o) }) {
		return nil, ahead{}, locker.ErrClosed
	}
	a.has, a.put = false, false // the lease owns them now
	ls.follow(rev)
	return ls.h, ahead{}, nil
}

// refresh renews our lease (KeepAliveOnce).
func (a *acquisition) refresh(ctx context.Context) error {
	sent := time.Now()
	ka, err := a.l.cli.KeepAliveOnce(ctx, a.rec.id)
	switch {
	case leaseGone(err):
		a.l.disown(a.rec.id)
		a.has, a.put, a.myRev = false, false, 0
		return fmt.Errorf("%w: lease %x expired while queued", errRequeue, int64(a.rec.id))
	case err != nil:
		return err
	}
	a.rec.renewed, a.rec.ttl = sent, time.Duration(ka.TTL)*time.Second
	return nil
}

// await waits until pred is deleted, keeping our lease alive meanwhile,
// or until ctx ends. It returns nil when the queue should be checked
// again.
func (a *acquisition) await(ctx context.Context, pred ahead) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch, gone, err := a.l.watchDeletion(wctx, pred.key, pred.created, pred.seen)
	if err != nil || gone != 0 {
		return err
	}
	every := max(a.rec.ttl/4, 100*time.Millisecond)
	t := time.NewTimer(time.Until(a.rec.renewed.Add(every)))
	defer t.Stop()
	for {
		select {
		case resp, ok := <-wch:
			if at, err := deletion(resp, ok); at != 0 || err != nil {
				return err
			}
		case <-t.C:
			rctx, rcancel := context.WithTimeout(ctx, every)
			err := a.refresh(rctx)
			rcancel()
			switch {
			case errors.Is(err, errRequeue):
				return err
			case err != nil && ctx.Err() == nil:
				t.Reset(every / 4) // the cluster's trouble: try again soon
			default:
				t.Reset(time.Until(a.rec.renewed.Add(every)))
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// abandon cleans up after a failed acquisition: a lease whose key may
// exist is revoked (at once while the caller's ctx allows, so that the
// next TryAcquire does not find the key, else in the background); a
// lease without a key goes back to the pool.
func (a *acquisition) abandon(caller context.Context) {
	if !a.has {
		return
	}
	a.has = false
	l := a.l
	if !a.put {
		l.recycle(a.rec)
		return
	}
	if caller.Err() == nil && l.closing.Err() == nil && l.revoke(caller, a.rec.id) == nil {
		return
	}
	l.revokeLater(a.rec.id)
}
