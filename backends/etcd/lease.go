package etcd

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockbench/lockbench/locker"
)

// lease is the backend side of a granted lock: its etcd key and the etcd
// lease the key is attached to. It implements locker.Holder and
// locker.Ender; the Handle it is registered with runs its lifecycle.
type lease struct {
	l    *Locker
	key  string // the lock's key
	path string // the etcd key
	rev  int64  // its create revision: the fencing token
	h    *locker.Handle
	// releasing is set before Release deletes the key, so that the DELETE
	// event of our own release is not taken for a loss.
	releasing atomic.Bool

	mu  sync.Mutex
	rec leaseRec // the etcd lease the key is attached to now
	// done is set when Release or Ended has taken rec: nothing else may
	// use or recycle it.
	done bool
	// watchTimer starts the watch on the key when it fires.
	watchTimer *time.Timer
}

var (
	_ locker.Holder = (*lease)(nil)
	_ locker.Ender  = (*lease)(nil)
)

// current returns the etcd lease, and whether the lease is still ours.
func (ls *lease) current() (leaseRec, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.rec, !ls.done
}

// take marks the lease done and returns its etcd lease, or false if
// Release or Ended already took it.
func (ls *lease) take() (leaseRec, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done {
		return leaseRec{}, false
	}
	ls.done = true
	if ls.watchTimer != nil {
		ls.watchTimer.Stop()
	}
	return ls.rec, true
}

// Extend implements locker.Holder. A ttl that rounds to at most the
// lease's TTL renews the lease (etcd renews to the TTL it was granted
// with) and checks that the key is still ours; a longer one moves the key
// to a new lease.
func (ls *lease) Extend(ctx context.Context, ttl time.Duration) (time.Time, error) {
	secs, err := ttlSeconds(ls.key, ttl)
	if err != nil {
		return time.Time{}, err
	}
	rec, ok := ls.current()
	if !ok {
		return time.Time{}, notHeld("%q is being released", ls.key)
	}
	if secs > rec.asked {
		return ls.migrate(ctx, rec, secs)
	}
	l := ls.l
	sent := time.Now()
	ka, err := l.cli.KeepAliveOnce(ctx, rec.id)
	switch {
	case leaseGone(err):
		l.disown(rec.id)
		return time.Time{}, notHeld("lease %x of %s is gone (expired or revoked)", int64(rec.id), ls.path)
	case err != nil:
		return time.Time{}, ls.fail(ctx, err)
	}
	if err := ls.check(ctx, rec.id); err != nil {
		return time.Time{}, err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.rec.id == rec.id {
		ls.rec.renewed, ls.rec.ttl = sent, time.Duration(ka.TTL)*time.Second
	}
	r := rec
	r.renewed, r.ttl = sent, time.Duration(ka.TTL)*time.Second
	return r.deadline(), nil
}

// check returns an error wrapping ErrNotHeld unless the key exists with
// our create revision, attached to lease id.
func (ls *lease) check(ctx context.Context, id clientv3.LeaseID) error {
	resp, err := ls.l.cli.Get(ctx, ls.path)
	if err != nil {
		return ls.fail(ctx, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != ls.rev {
		return notHeld("key %s (created at revision %d) was deleted", ls.path, ls.rev)
	}
	if got := clientv3.LeaseID(resp.Kvs[0].Lease); got != id {
		if cur, _ := ls.current(); cur.id != got { // not moved by a concurrent Extend
			return notHeld("key %s is attached to lease %x, not ours (%x)", ls.path, int64(got), int64(id))
		}
	}
	return nil
}

// migrate moves the key to a new lease of secs seconds, in a transaction
// that checks it is still ours, and revokes the old lease.
func (ls *lease) migrate(ctx context.Context, old leaseRec, secs int64) (time.Time, error) {
	l := ls.l
	rec, err := l.grant(ctx, secs)
	if err != nil {
		return time.Time{}, ls.fail(ctx, err)
	}
	resp, err := l.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(ls.path), "=", ls.rev),
		clientv3.Compare(clientv3.LeaseValue(ls.path), "=", old.id),
	).Then(clientv3.OpPut(ls.path, "", clientv3.WithLease(rec.id))).Commit()
	if err != nil {
		l.revokeLater(rec.id)
		return time.Time{}, ls.fail(ctx, err)
	}
	if !resp.Succeeded {
		l.revokeLater(rec.id)
		return time.Time{}, notHeld("key %s (created at revision %d) is gone or no longer on lease %x", ls.path, ls.rev, int64(old.id))
	}
	ls.mu.Lock()
	if ls.done {
		ls.mu.Unlock()
		l.revokeLater(rec.id)
		return time.Time{}, notHeld("%q was released while its TTL was changed", ls.key)
	}
	ls.rec = rec
	ls.mu.Unlock()
	l.revokeLater(old.id)
	return rec.deadline(), nil
}

// fail classifies the error of a request about a held key: the ctx's end
// as it is, anything else as the cluster's failure.
func (ls *lease) fail(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, ls.l.nodeErr(err))
	}
	return ls.l.nodeErr(err)
}

// Release implements locker.Holder: it deletes the key, and checks that
// what it deleted had our create revision (nobody else puts a key of that
// name: it holds the id of the lease it was created with). It retries
// while the cluster is unavailable, until ctx ends or the lease's deadline
// passes (the server then frees the key anyway); a retry that finds the
// key gone counts as released, since the attempt before may have deleted
// it. The etcd lease then goes back to the pool, or is revoked.
func (ls *lease) Release(ctx context.Context) error {
	l := ls.l
	ls.releasing.Store(true)
	rec, ok := ls.take()
	l.forget(ls)
	if !ok {
		return notHeld("%q has already ended", ls.key)
	}
	retried := false
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		resp, err := l.cli.Delete(ctx, ls.path, clientv3.WithPrevKV())
		switch {
		case err == nil && len(resp.PrevKvs) == 1 && resp.PrevKvs[0].CreateRevision == ls.rev:
			l.recycle(rec)
			return nil
		case err == nil && len(resp.PrevKvs) == 0 && retried:
			l.revokeLater(rec.id) // deleted by the attempt before, most likely
			return nil
		case err == nil:
			l.revokeLater(rec.id)
			return notHeld("key %s (created at revision %d) was already deleted", ls.path, ls.rev)
		case transient(err) && ctx.Err() == nil && time.Now().Add(wait).Before(rec.deadline()) && sleep(ctx, wait):
			retried = true
			continue
		}
		// The key may still exist: revoking the lease deletes it.
		l.revokeLater(rec.id)
		return ls.fail(ctx, err)
	}
}

// Ended implements locker.Ender: a lease that expired or was lost is
// revoked, which deletes the key if it still exists, so that the lock is
// free now rather than when the server expires it. Once the Locker is
// closing, Close revokes it.
func (ls *lease) Ended(error) {
	rec, ok := ls.take()
	ls.l.forget(ls)
	if ok {
		ls.l.revokeLater(rec.id)
	}
}

// lost ends the lease with ErrLost when its key was deleted at revision
// rev, unless that is our own release, or the lease had reached its
// ValidUntil (it then ends as expired: by the timer, or the watchdog's
// failure).
func (ls *lease) lost(rev int64) {
	if ls.releasing.Load() || !time.Now().Before(ls.h.ValidUntil()) {
		return
	}
	ls.h.Lose(fmt.Errorf("key %s was deleted at revision %d: its lease was revoked or expired, or the key deleted, behind the "+
		"holder's back", ls.path, rev))
}

// register records a granted lease, making its Handle with newHandle,
// unless the Locker is closing.
func (l *Locker) register(ls *lease, newHandle func() *locker.Handle) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing.Err() != nil {
		return false
	}
	ls.h = newHandle()
	l.held[ls] = struct{}{}
	return true
}

// forget drops a lease that ended or is being released.
func (l *Locker) forget(ls *lease) {
	l.mu.Lock()
	delete(l.held, ls)
	l.mu.Unlock()
}
