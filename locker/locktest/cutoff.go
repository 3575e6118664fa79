package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Takeover is what CutOff observed, timed from the cut.
type Takeover struct {
	// Lease is the other client's grant; Heal releases it, or the caller
	// does.
	Lease locker.Lease
	// Ended is when the cut-off holder's lease ended.
	Ended time.Duration
	// Granted is when the other client was granted the key.
	Granted time.Duration
}

// CutOff checks what a lock owes a holder that is cut off from its
// servers: nobody else gets the key while the holder may still believe it
// holds it. Another client, other, starts acquiring held's key (giving
// up after within); then cut cuts the holder off. When other is granted
// the key, held must already have ended, with ErrLost, and the new
// grant's token must be above held's.
func CutOff(t *testing.T, held locker.Lease, other locker.Locker, within time.Duration, cut func() error) Takeover {
	t.Helper()
	type grant struct {
		lease locker.Lease
		err   error
		at    time.Time
	}
	granted := make(chan grant, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		lease, err := other.Acquire(ctx, held.Key(), locker.WithTTL(time.Minute))
		granted <- grant{lease, err, time.Now()}
	}()
	ended := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		ended <- time.Now()
	}()

	start := time.Now()
	if err := cut(); err != nil {
		t.Fatal(err)
	}
	g := <-granted
	if g.err != nil {
		t.Fatalf("the other client's Acquire: %v", g.err)
	}
	select {
	case <-held.Done():
	default:
		t.Fatalf("key granted to another client %v after the cut while the cut-off holder's lease was still held", g.at.Sub(start))
	}
	tk := Takeover{Lease: g.lease, Ended: (<-ended).Sub(start), Granted: g.at.Sub(start)}
	t.Logf("cut at 0: holder's lease ended at %v, key granted again at %v; holder's Err: %v",
		tk.Ended.Round(time.Millisecond), tk.Granted.Round(time.Millisecond), held.Err())
	if !errors.Is(held.Err(), locker.ErrLost) {
		t.Fatalf("cut-off holder's Err = %v, want ErrLost", held.Err())
	}
	if tokA, ok := held.Token(); ok {
		if tokB, _ := g.lease.Token(); tokB <= tokA {
			t.Fatalf("token of the new grant %d not above the lost lease's %d", tokB, tokA)
		}
	}
	return tk
}

// Heal ends the cut: heal undoes it, the other client's grant is
// released, and holder — the cut-off holder's Locker — must then be
// granted the key again: a lock recovers from a partition.
func (tk Takeover) Heal(t *testing.T, holder locker.Locker, heal func() error) {
	t.Helper()
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tk.Lease.Release(ctx); err != nil {
		t.Fatalf("release of the other client's grant: %v", err)
	}
	again, err := holder.Acquire(ctx, tk.Lease.Key(), locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("the holder's Locker after the cut healed: %v", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond every 10 ms until it holds, failing the test when it
// does not within the given time; what names the awaited condition.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// KeepsGranting checks a lock that has lost a server (what says which):
// a and b, Lockers on the same servers, take turns at 20 grants of a key,
// each within the given time, while held, a lease on another key, stays
// held, can be extended and cannot be taken by b.
func KeepsGranting(t *testing.T, what string, a, b locker.Locker, held locker.Lease, within time.Duration) {
	t.Helper()
	start := time.Now()
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		ctx, cancel := context.WithTimeout(context.Background(), within)
		lease, err := l.Acquire(ctx, "keeps-granting:"+held.Key(), locker.WithTTL(30*time.Second))
		if err == nil {
			err = lease.Release(ctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: grant %d: %v", what, i, err)
		}
	}
	t.Logf("%s: 20 grants in %v", what, time.Since(start).Round(time.Millisecond))
	if err := held.Err(); err != nil {
		t.Fatalf("%s: the lease held all along ended: %v", what, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := held.Extend(ctx, 10*time.Minute); err != nil {
		t.Fatalf("%s: Extend of the lease held all along: %v", what, err)
	}
	if lease, err := b.TryAcquire(ctx, held.Key()); !errors.Is(err, locker.ErrNotAcquired) {
		if lease != nil {
			_ = lease.Release(ctx)
		}
		t.Fatalf("%s: TryAcquire of the held key = %v, want ErrNotAcquired", what, err)
	}
}
