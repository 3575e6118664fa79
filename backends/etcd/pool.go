package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockbench/lockbench/locker"
)

// leaseRec is what the Locker knows of one etcd lease.
type leaseRec struct {
	id    clientv3.LeaseID
	asked int64         // the TTL asked for, in seconds
	ttl   time.Duration // the TTL the server granted or renewed to
	// renewed is when the latest Grant or keep-alive that succeeded was
	// sent: the server cannot expire the lease before renewed + ttl.
	renewed time.Time
}

// deadline is the local deadline of the lease: renewed + ttl, less an
// allowance of 1% + 2 ms for the server's clock running faster than ours
// and for our timers firing late.
func (r leaseRec) deadline() time.Time {
	return r.renewed.Add(r.ttl - r.ttl/100 - 2*time.Millisecond)
}

// fresh reports whether the lease was renewed less than a tenth of its
// TTL ago, so that a grant on it keeps nine tenths of its TTL.
func (r leaseRec) fresh() bool { return time.Since(r.renewed) <= r.ttl/10 }

// ttlSeconds rounds ttl up to the whole seconds etcd counts leases in.
func ttlSeconds(key string, ttl time.Duration) (int64, error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	if ttl > time.Duration(maxLeaseSeconds)*time.Second || secs > maxLeaseSeconds {
		return 0, locker.Invalidf("TTL %v for key %q: etcd leases last at most %d s", ttl, key, int64(maxLeaseSeconds))
	}
	return secs, nil
}

// takeLease returns a fresh lease of secs seconds: one from the pool, or
// a new Grant.
func (l *Locker) takeLease(ctx context.Context, secs int64) (leaseRec, error) {
	l.mu.Lock()
	recs := l.pool[secs]
	for len(recs) > 0 {
		r := recs[len(recs)-1]
		recs = recs[:len(recs)-1]
		l.idle--
		if r.fresh() {
			l.pool[secs] = recs
			l.mu.Unlock()
			return r, nil
		}
		l.spawnRevokeLocked(r.id)
	}
	delete(l.pool, secs)
	l.mu.Unlock()
	return l.grant(ctx, secs)
}

// grant asks the cluster for a lease of secs seconds.
func (l *Locker) grant(ctx context.Context, secs int64) (leaseRec, error) {
	sent := time.Now()
	resp, err := l.cli.Grant(ctx, secs)
	if err != nil {
		return leaseRec{}, err
	}
	l.mu.Lock()
	closed := l.closing.Err() != nil
	if !closed {
		l.owned[resp.ID] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		// Close has swept already: revoke it here, on the way out.
		rctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
		_, _ = l.cli.Revoke(rctx, resp.ID)
		cancel()
		return leaseRec{}, locker.ErrClosed
	}
	return leaseRec{id: resp.ID, asked: secs, ttl: time.Duration(resp.TTL) * time.Second, renewed: sent}, nil
}

// recycle takes back a lease that no key is attached to: it goes to the
// pool if it is fresh and there is room, else it is revoked.
func (l *Locker) recycle(r leaseRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing.Err() == nil && l.idle < l.poolSize && r.fresh() {
		l.pool[r.asked] = append(l.pool[r.asked], r)
		l.idle++
		return
	}
	l.spawnRevokeLocked(r.id)
}

// revokeLater revokes a lease in the background (which deletes the key
// attached to it), retrying while the cluster is unavailable. Once Close
// has begun, Close revokes it instead.
func (l *Locker) revokeLater(id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spawnRevokeLocked(id)
}

func (l *Locker) spawnRevokeLocked(id clientv3.LeaseID) {
	l.closing.Go(func() {
		ctx := l.closing.Context()
		for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			err := l.revoke(ctx, id)
			if err == nil || !transient(err) || !sleep(ctx, wait) {
				return
			}
		}
	})
}

// revoke revokes a lease now. A lease the cluster no longer has counts as
// revoked.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := l.cli.Revoke(ctx, id)
	if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.mu.Lock()
		delete(l.owned, id)
		l.mu.Unlock()
		return nil
	}
	return err
}

// disown forgets a lease the cluster is known not to have any more.
func (l *Locker) disown(id clientv3.LeaseID) {
	l.mu.Lock()
	delete(l.owned, id)
	l.mu.Unlock()
}

// errRequeue reports an acquisition whose key left the queue (its lease
// expired or was revoked, or the key was deleted): it must queue again.
var errRequeue = errors.New("lock key left the queue")

// transient reports whether err is the cluster's passing trouble — no
// leader, a member down, a request timed out — which a retry may
// overcome. Bad requests, failed authentication and denied permissions
// are not.
func transient(err error) bool {
	if errors.Is(err, errRequeue) {
		return true
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if s, ok := status.FromError(err); ok {
		code = s.Code()
	} else {
		return false
	}
	switch code {
	case codes.Unavailable, codes.Internal, codes.ResourceExhausted, codes.Aborted, codes.Unknown, codes.DeadlineExceeded:
		return true
	}
	return false
}

// leaseGone reports whether err says the lease does not exist (any more).
func leaseGone(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }

// notHeld is the error of an operation on a lock key that is no longer
// ours.
func notHeld(format string, args ...any) error {
	return fmt.Errorf("%w: %s", locker.ErrNotHeld, fmt.Sprintf(format, args...))
}
