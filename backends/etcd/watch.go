package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errWatchEnded reports a watch that ended without the deletion it was
// waiting for: compaction, a member's trouble, the client closing.
var errWatchEnded = errors.New("watch ended")

// watchDeletion watches key — the incarnation created at revision
// created, seen alive at revision seen — for its deletion. It returns the
// watch once it is in place, or the revision by which the key is known to
// be deleted (gone, 0 if it is not). The caller ends the watch by
// cancelling ctx.
//
// The watch starts at the member's current revision rather than at seen
// + 1: a watch that starts in the past is "unsynced", and the member
// catches such watches up only every 100 ms, which would delay a waiter's
// wake-up by as much. Instead, when the member's revision at the watch's
// creation is past seen, the key is read once more: if it is still that
// incarnation, its deletion comes after the watch's start, and is seen.
func (l *Locker) watchDeletion(ctx context.Context, key string, created, seen int64) (wch clientv3.WatchChan, gone int64, err error) {
	// WithRequireLeader: a member cut off from the leader ends the watch
	// (it would never see the deletion), so the caller looks again,
	// likely through another member.
	wch = l.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	var start int64
	select {
	case resp, ok := <-wch:
		if !ok || resp.Canceled || resp.Err() != nil || !resp.Created {
			if cerr := ctx.Err(); cerr != nil {
				return nil, 0, cerr
			}
			return nil, 0, fmt.Errorf("%w before it started on %s: %v", errWatchEnded, key, resp.Err())
		}
		start = resp.Header.Revision
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	if start <= seen {
		return wch, 0, nil
	}
	resp, err := l.cli.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != created {
		return nil, resp.Header.Revision, nil
	}
	return wch, 0, nil
}

// deletion returns the revision of the deletion a watch response
// reports, 0 if none, or errWatchEnded if the watch ended.
func deletion(resp clientv3.WatchResponse, ok bool) (int64, error) {
	if !ok || resp.Canceled || resp.Err() != nil {
		return 0, fmt.Errorf("%w: %v", errWatchEnded, resp.Err())
	}
	for _, ev := range resp.Events {
		if ev.Type == clientv3.EventTypeDelete {
			return ev.Kv.ModRevision, nil
		}
	}
	return 0, nil
}

// watchAfter is how long a lease is held before the watch on its key
// starts. A deletion in between is still seen (watchDeletion reads the key
// when the watch starts), watchAfter later; a lock released sooner — most
// locks in a tight loop — never pays for creating and cancelling a watch,
// which costs about as much as the lock itself.
const watchAfter = 20 * time.Millisecond

// follow arranges for the watch on the lease's key, granted at revision
// rev, to start once the lease has been held for watchAfter.
func (ls *lease) follow(rev int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done {
		return
	}
	ls.watchTimer = time.AfterFunc(watchAfter, func() { ls.l.closing.Go(func() { ls.watch(rev) }) })
}

// watch follows the lease's own key, seen alive at revision rev: its
// deletion means the lock is no longer ours. It returns when the lease
// ends or the Locker closes, and starts again after a watch that failed.
func (ls *lease) watch(rev int64) {
	ctx, cancel := context.WithCancel(ls.l.closing.Context())
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		at, err := ls.watchOnce(ctx, rev)
		if at != 0 {
			ls.lost(at)
			return
		}
		if err == nil || ctx.Err() != nil {
			return // the lease ended, or the Locker closed
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ls.h.Done():
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// watchOnce watches the lease's key until it is deleted (it returns the
// revision), the lease ends (0, nil) or the watch fails (0 and the error).
func (ls *lease) watchOnce(ctx context.Context, rev int64) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch, gone, err := ls.l.watchDeletion(ctx, ls.path, ls.rev, rev)
	if err != nil || gone != 0 {
		return gone, err
	}
	for {
		select {
		case <-ls.h.Done():
			return 0, nil
		case resp, ok := <-wch:
			if at, err := deletion(resp, ok); at != 0 || err != nil {
				return at, err
			}
		}
	}
}
