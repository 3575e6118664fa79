package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

func TestOpenRejects(t *testing.T) {
	backendstest.RefusesBadConfigs(t, "etcd", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "bad address", Config: backends.Config{Addrs: []string{"localhost"}}, Want: `"localhost"`},
		{Name: "bad scheme", Config: backends.Config{Addrs: []string{"ftp://h:1"}}, Want: `"ftp://h:1"`},
		{Name: "unknown param", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"ttl": "1s"}}, Want: "ttl"},
		{Name: "dialtimeout", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"dialtimeout": "0s"}}, Want: "dialtimeout=0s"},
		{Name: "dialtimeout syntax", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"dialtimeout": "soon"}}, Want: `"soon"`},
		{Name: "prefix", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"prefix": "/"}}, Want: `prefix="/"`},
		{Name: "leasepool", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"leasepool": "-1"}}, Want: "leasepool=-1"},
		{Name: "keepalive", Config: backends.Config{Addrs: []string{"h:1"}, Params: map[string]string{"keepalive": "10ms"}}, Want: "keepalive=10ms"},
		{Name: "password alone", Config: backends.Config{Addrs: []string{"h:1"}, Password: "secret"}, Want: "without a username"},
	})
}

func TestEndpointURLs(t *testing.T) {
	got, err := endpointURLs([]string{"127.0.0.1:2379", " h:1 ", "https://e:2", "[::1]:3"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:2379", "http://h:1", "https://e:2", "http://[::1]:3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("endpointURLs = %q, want %q", got, want)
	}
	if got, _ := endpointURLs([]string{"h:1"}, true); got[0] != "https://h:1" {
		t.Fatalf("with TLS: %q, want https://h:1", got[0])
	}
	l, err := backends.Open("etcd", backends.Config{Addrs: []string{"h:1"}, TLS: &tls.Config{}, Params: map[string]string{"prefix": "app/locks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if info := l.Info(); info.Nodes[0] != "https://h:1" || info.Quorum != 1 || info.TTLResolution != time.Second || !info.Fencing {
		t.Fatalf("Info = %+v", info)
	}
	if p := l.(*Locker).Prefix("a/b%c"); p != "app/locks/a%2Fb%25c/" {
		t.Fatalf("Prefix = %q", p)
	}
}

func TestTTLSeconds(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{
		time.Nanosecond: 1, 500 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, time.Minute: 60,
	} {
		if got, err := ttlSeconds("k", ttl); err != nil || got != want {
			t.Errorf("ttlSeconds(%v) = %d, %v; want %d", ttl, got, err, want)
		}
	}
	if _, err := ttlSeconds("k", time.Duration(math.MaxInt64)); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("ttlSeconds of a TTL beyond etcd's maximum = %v, want ErrInvalid", err)
	}
}

// TestRevokedBehindBack revokes the holder's etcd lease from another
// client, which finds it through the lock key in etcd: the lease must end
// with ErrLost, and a release must then say it was not held.
func TestRevokedBehindBack(t *testing.T) {
	endpoints := single(t)
	l := openClosed(t, endpoints, nil)
	thief := rawClient(t, endpoints)
	lease := locktest.MustAcquire(t, l, "revoked", locker.WithTTL(time.Minute))
	_, id := holderKey(t, thief, l.Prefix("revoked"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := thief.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := locktest.WaitDone(t, lease, 10*time.Second); !errors.Is(err, locker.ErrLost) {
		t.Fatalf("Err of a lease revoked behind its back = %v, want ErrLost", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("Release of a revoked lease = %v, want ErrNotHeld", err)
	}
	next := locktest.MustAcquire(t, l, "revoked", locker.WithTTL(time.Minute))
	if a, b := tokenOf(lease), tokenOf(next); b <= a {
		t.Fatalf("token after the revocation %d not above the revoked lease's %d", b, a)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func tokenOf(l locker.Lease) uint64 {
	tok, _ := l.Token()
	return tok
}

// TestTTLRoundedUp checks that a sub-second and a fractional TTL become
// whole-second etcd leases, and that ValidUntil follows the server's TTL.
func TestTTLRoundedUp(t *testing.T) {
	endpoints := single(t)
	l := openClosed(t, endpoints, nil)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		ttl  time.Duration
		want int64
	}{{300 * time.Millisecond, 1}, {1500 * time.Millisecond, 2}} {
		start := time.Now()
		lease := locktest.MustAcquire(t, l, "rounded", locker.WithTTL(tc.ttl))
		_, id := holderKey(t, c, l.Prefix("rounded"))
		ttl, err := c.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.GrantedTTL != tc.want {
			t.Errorf("TTL %v: etcd lease of %d s, want %d s", tc.ttl, ttl.GrantedTTL, tc.want)
		}
		if vu := lease.ValidUntil(); vu.Before(start.Add(time.Duration(tc.want)*time.Second*9/10)) || vu.After(time.Now().Add(time.Duration(tc.want)*time.Second)) {
			t.Errorf("TTL %v: ValidUntil %v after the start, want about %d s", tc.ttl, vu.Sub(start), tc.want)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExtendLonger moves the key to a longer lease: the token stays, the
// key's lease changes and the old lease is revoked.
func TestExtendLonger(t *testing.T) {
	endpoints := single(t)
	l := openClosed(t, endpoints, nil)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease := locktest.MustAcquire(t, l, "longer", locker.WithTTL(time.Second))
	path, before := holderKey(t, c, l.Prefix("longer"))
	tok := tokenOf(lease)
	if err := lease.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if until := time.Until(lease.ValidUntil()); until < 4*time.Second {
		t.Fatalf("ValidUntil %v from now after Extend(5s)", until)
	}
	again, after := holderKey(t, c, l.Prefix("longer"))
	if again != path || after == before || tokenOf(lease) != tok {
		t.Fatalf("after Extend: key %s on lease %x (was %s on %x), token %d (was %d)", again, int64(after), path, int64(before), tokenOf(lease), tok)
	}
	if ttl, err := c.TimeToLive(ctx, after); err != nil || ttl.GrantedTTL != 5 {
		t.Fatalf("new lease: %s; want a 5 s lease", ttlString(ttl, err))
	}
	locktest.WaitFor(t, 10*time.Second, "the old lease revoked", func() bool {
		ttl, err := c.TimeToLive(ctx, before)
		return err == nil && ttl.TTL == -1
	})
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNothingLeftBehind checks that a failed TryAcquire leaves no key in
// the queue, that a waiter that gives up deletes its own, and that keys
// with '/' do not nest into another key's queue.
func TestNothingLeftBehind(t *testing.T) {
	endpoints := single(t)
	a, b := openClosed(t, endpoints, nil), openClosed(t, endpoints, nil)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	count := func() int64 {
		n, err := queueLen(ctx, c, a.Prefix("left"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	held := locktest.MustAcquire(t, a, "left", locker.WithTTL(time.Minute))
	if _, err := b.TryAcquire(ctx, "left"); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key = %v, want ErrNotAcquired", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after a failed TryAcquire the queue has %d keys, want 1", n)
	}
	if _, err := b.Acquire(ctx, "left", locker.WithRetry(locker.NoRetry())); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("Acquire with NoRetry of a held key = %v, want ErrNotAcquired", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after an Acquire that gave up the queue has %d keys, want 1", n)
	}
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := b.Acquire(wctx, "left")
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	locktest.WaitFor(t, 10*time.Second, "the waiter's key deleted", func() bool { return count() == 1 })
	nested, err := b.TryAcquire(ctx, "left/nested")
	if err != nil {
		t.Fatalf("TryAcquire of a key below a held one: %v", err)
	}
	for _, l := range []locker.Lease{nested, held} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLongWait has a waiter with a 1 s TTL wait three times that long: its
// lease must be kept alive meanwhile (its key stays in the queue), and the
// grant must start with nearly a full TTL.
func TestLongWait(t *testing.T) {
	endpoints := single(t)
	a, b := openClosed(t, endpoints, nil), openClosed(t, endpoints, nil)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := locktest.MustAcquire(t, a, "long", locker.WithTTL(time.Minute))
	type result struct {
		lease locker.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		lease, err := b.Acquire(ctx, "long", locker.WithTTL(time.Second))
		got <- result{lease, err}
	}()
	locktest.WaitFor(t, 10*time.Second, "the waiter queued", func() bool {
		n, err := queueLen(ctx, c, b.Prefix("long"))
		return err == nil && n == 2
	})
	waiterKey, waiterLease := holderKeyAt(t, c, b.Prefix("long"), 1)
	select {
	case r := <-got:
		t.Fatalf("the waiter returned while the key was held: %v", r.err)
	case <-time.After(3 * time.Second):
	}
	// etcd reports the seconds left, truncated: -1 once the lease is gone.
	if ttl, err := c.TimeToLive(ctx, waiterLease); err != nil || ttl.TTL < 0 {
		t.Fatalf("the waiter's lease after 3 TTLs of waiting: %v; want it alive", ttlString(ttl, err))
	}
	if k, _ := holderKeyAt(t, c, b.Prefix("long"), 1); k != waiterKey {
		t.Fatalf("the waiter's key after 3 TTLs of waiting is %s, want %s", k, waiterKey)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if left := time.Until(r.lease.ValidUntil()); left < 700*time.Millisecond {
		t.Fatalf("a grant after a long wait is valid for %v of its 1s TTL", left)
	}
	if tokenOf(r.lease) <= tokenOf(held) {
		t.Fatalf("token %d of the waiter not above the holder's %d", tokenOf(r.lease), tokenOf(held))
	}
	if err := r.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWatchDeletion checks the watch that starts at the member's current
// revision: it sees the deletion of the incarnation it was given, and
// reports at once one that was deleted, or replaced, before it started.
func TestWatchDeletion(t *testing.T) {
	endpoints := single(t)
	l := openClosed(t, endpoints, nil)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := l.Prefix("watched") + "k"
	put := func() int64 {
		resp, err := c.Put(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	del := func() int64 {
		resp, err := c.Delete(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	watch := func(created, seen int64) (clientv3.WatchChan, int64) {
		wch, gone, err := l.watchDeletion(ctx, key, created, seen)
		if err != nil {
			t.Fatal(err)
		}
		return wch, gone
	}
	awaitDeletion := func(wch clientv3.WatchChan, want int64) {
		t.Helper()
		for {
			select {
			case resp, ok := <-wch:
				at, err := deletion(resp, ok)
				if err != nil {
					t.Fatal(err)
				}
				if at == 0 {
					continue
				}
				if at != want {
					t.Fatalf("deletion at revision %d, want %d", at, want)
				}
				return
			case <-ctx.Done():
				t.Fatal("no deletion seen")
			}
		}
	}

	// Seen at the current revision: no read needed.
	created := put()
	wch, gone := watch(created, created)
	if gone != 0 {
		t.Fatalf("a live key reported gone at %d", gone)
	}
	awaitDeletion(wch, del())

	// Seen in the past, still alive: the read confirms it.
	created = put()
	if _, err := c.Put(ctx, key+"-other", ""); err != nil {
		t.Fatal(err)
	}
	wch, gone = watch(created, created)
	if gone != 0 {
		t.Fatalf("a live key seen in the past reported gone at %d", gone)
	}
	awaitDeletion(wch, del())

	// Deleted, or deleted and put again, since it was seen: gone at once.
	if _, gone = watch(created, created); gone == 0 {
		t.Fatal("a deleted key not reported gone")
	}
	put()
	if _, gone = watch(created, created); gone == 0 {
		t.Fatal("a key put again (another incarnation) not reported gone")
	}
}

// TestLeasePool checks that a released lease is reused by the next
// acquisition with the same TTL, and not with leasepool=0.
func TestLeasePool(t *testing.T) {
	endpoints := single(t)
	c := rawClient(t, endpoints)
	for _, tc := range []struct {
		pool   string
		reused bool
	}{{"8", true}, {"0", false}} {
		l := openClosed(t, endpoints, map[string]string{"leasepool": tc.pool})
		var ids []clientv3.LeaseID
		for range 2 {
			lease := locktest.MustAcquire(t, l, "pool", locker.WithTTL(time.Minute))
			_, id := holderKey(t, c, l.Prefix("pool"))
			ids = append(ids, id)
			if err := lease.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if (ids[0] == ids[1]) != tc.reused {
			t.Errorf("leasepool=%s: leases %x then %x, want reuse %v", tc.pool, int64(ids[0]), int64(ids[1]), tc.reused)
		}
	}
}

// TestCloseNoLeak closes a Locker that holds leases (one moved to a longer
// lease, one auto-extended), has released leases in its pool, and a waiter
// blocked in Acquire: the waiter must get ErrClosed, every lease be
// revoked, and no goroutine be left behind. (Not parallel: the leak check
// would see the goroutines of other tests.)
func TestCloseNoLeak(t *testing.T) {
	endpoints := single(t)
	c := rawClient(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "connect"); err != nil { // gRPC connects lazily: before the snapshot
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	l := open(t, endpoints, nil)
	pooled := locktest.MustAcquire(t, l, "close:pooled", locker.WithTTL(time.Minute))
	_, pooledID := holderKey(t, c, l.Prefix("close:pooled"))
	if err := pooled.Release(ctx); err != nil {
		t.Fatal(err)
	}
	moved := locktest.MustAcquire(t, l, "close:moved", locker.WithTTL(time.Second))
	if err := moved.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	auto := locktest.MustAcquire(t, l, "close:auto", locker.WithTTL(time.Second), locker.WithAutoExtend(true))
	waiting := make(chan error, 1)
	go func() {
		_, err := l.Acquire(context.Background(), "close:auto")
		waiting <- err
	}()
	locktest.WaitFor(t, 10*time.Second, "the waiter queued", func() bool {
		n, err := queueLen(ctx, c, l.Prefix("close:auto"))
		return err == nil && n == 2
	})
	leases := []clientv3.LeaseID{pooledID}
	for _, key := range []string{"close:moved", "close:auto"} {
		_, id := holderKey(t, c, l.Prefix(key))
		leases = append(leases, id)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Acquire blocked while the Locker closed = %v, want ErrClosed", err)
	}
	for _, lease := range []locker.Lease{moved, auto} {
		if err := lease.Err(); !errors.Is(err, locker.ErrLost) || !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("lease %q after Close: %v, want ErrLost wrapping ErrClosed", lease.Key(), err)
		}
	}
	for _, id := range leases {
		if ttl, err := c.TimeToLive(ctx, id); err != nil || ttl.TTL != -1 {
			t.Fatalf("lease %x after Close: %s; want it revoked", int64(id), ttlString(ttl, err))
		}
	}
	if n, err := queueLen(ctx, c, DefaultPrefix+"close:"); err != nil || n != 0 {
		t.Fatalf("after Close %d lock keys are left (%v), want 0", n, err)
	}
	goleak.VerifyNone(t, before)
}

// ttlString describes the answer to a TimeToLive request.
func ttlString(ttl *clientv3.LeaseTimeToLiveResponse, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("lease %x: TTL %d s of %d s", int64(ttl.ID), ttl.TTL, ttl.GrantedTTL)
}
