//go:build go1.25

package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends/redlock"
)

// TestHandoffTail explains the latency tail of 16 Redlocks (as 16
// processes) on one key: where an operation's time goes when it is slow.
// With a fair hand-off an Acquire waits for the holders ahead of it, about
// 15 hand-offs, so a slow one either had slow hand-offs ahead of it (the
// gap between a Release's start and the next grant: a wake-up late, a
// claim round, scheduling) or lost its place (more grants to others while
// it waited than there are other clients: its registration missed the
// queue, or it went to the back). The key is held by one client at a
// time, so every grant and release falls on one timeline. Skipped unless
// -compare is set (it runs that long):
//
//	go test -run HandoffTail -v ./backends/redlock -args -compare=10s
func TestHandoffTail(t *testing.T) {
	if *compare <= 0 {
		t.Skip("set -compare")
	}
	const n = 16
	key := fmt.Sprintf("tail:%d", time.Now().UnixNano())
	var (
		mu     sync.Mutex
		grants []time.Time // every grant, in order (the key's timeline)
		frees  []time.Time // the start of every release, in order
		ops    []tailOp
	)
	locks := make([]*redlock.Redlock, n)
	for i := range locks {
		locks[i] = newRedlock(t, addrs)
	}
	run := func(ctx context.Context, l *redlock.Redlock, record bool) error {
		start := time.Now()
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			return err
		}
		granted := time.Now()
		mu.Lock()
		if record {
			ops = append(ops, tailOp{start: start, granted: granted, index: len(grants)})
		}
		grants = append(grants, granted)
		frees = append(frees, time.Now()) // the release starts now
		mu.Unlock()
		return lease.Release(ctx)
	}
	// Warm up: every client has waited once (its blocking connections are
	// open), as in the comparison.
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			for range 3 {
				if err := run(context.Background(), l, false); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	stop := time.Now().Add(*compare)
	for _, l := range locks {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := run(context.Background(), l, true); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(ops) == 0 {
		t.Fatal("no operation measured")
	}
	// The gap before grant j is grants[j] - frees[j-1]: the hand-off.
	var gaps []time.Duration
	for j := 1; j < len(grants); j++ {
		gaps = append(gaps, grants[j].Sub(frees[j-1]))
	}
	for i := range ops {
		o := &ops[i]
		o.ahead = o.index - grantsBefore(grants, o.start)
		for j := max(1, grantsBefore(grants, o.start)); j <= o.index; j++ {
			o.worst = max(o.worst, gaps[j-1])
		}
	}
	lat := make([]time.Duration, len(ops))
	for i, o := range ops {
		lat[i] = o.granted.Sub(o.start)
	}
	slices.Sort(lat)
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	pct := func(s []time.Duration, p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	t.Logf("%d acquires by %d Redlocks in %v: wait p50 %s p90 %s p99 %s max %s", len(ops), n, *compare, ms(pct(lat, .5)), ms(pct(lat, .9)), ms(pct(lat, .99)), ms(lat[len(lat)-1]))
	t.Logf("hand-off gap (a release's start to the next grant): p50 %s p90 %s p99 %s p99.9 %s max %s; over 10 ms: %d of %d, over 50 ms: %d",
		ms(pct(sorted, .5)), ms(pct(sorted, .9)), ms(pct(sorted, .99)), ms(pct(sorted, .999)), ms(sorted[len(sorted)-1]),
		countOver(gaps, 10*time.Millisecond), len(gaps), countOver(gaps, 50*time.Millisecond))
	// Grants to others while an Acquire waited: FIFO allows n-1.
	overtaken := 0
	aheadHist := map[string]int{}
	for _, o := range ops {
		switch {
		case o.ahead <= n-1:
			aheadHist["<=15"]++
		case o.ahead <= 2*(n-1):
			aheadHist["16-30"]++
			overtaken++
		default:
			aheadHist[">30"]++
			overtaken++
		}
	}
	t.Logf("grants to others while waiting (FIFO: at most %d): %v; lost its place: %d of %d (%.1f%%)", n-1, aheadHist, overtaken, len(ops), 100*float64(overtaken)/float64(len(ops)))
	// The slowest 1%: why.
	p99 := pct(lat, .99)
	var slowLost, slowGap, slowBoth, slowNeither int
	var slowAhead []int
	var slowSum, slowGapSum time.Duration
	for _, o := range ops {
		if o.granted.Sub(o.start) < p99 {
			continue
		}
		lost, gap := o.ahead > n-1, o.worst > 4*pct(sorted, .5)+10*time.Millisecond
		slowAhead = append(slowAhead, o.ahead)
		slowSum += o.granted.Sub(o.start)
		// how much of its wait went to gaps over the median
		for j := max(1, grantsBefore(grants, o.start)); j <= o.index; j++ {
			if g := gaps[j-1]; g > pct(sorted, .5) {
				slowGapSum += g - pct(sorted, .5)
			}
		}
		switch {
		case lost && gap:
			slowBoth++
		case lost:
			slowLost++
		case gap:
			slowGap++
		default:
			slowNeither++
		}
	}
	slices.Sort(slowAhead)
	t.Logf("the slowest 1%% (wait ≥ %s): lost its place only %d, a slow hand-off (over 4×median+10 ms) only %d, both %d, neither %d; grants to others while they waited %v; of their wait, %.0f%% was hand-off gaps' excess over the median gap",
		ms(p99), slowLost, slowGap, slowBoth, slowNeither, slowAhead, 100*slowGapSum.Seconds()/slowSum.Seconds())
}

type tailOp struct {
	start, granted time.Time
	index          int           // its grant's on the key's timeline
	ahead          int           // grants to others while it waited
	worst          time.Duration // its slowest hand-off gap while it waited
}

// grantsBefore returns how many grants came before t.
func grantsBefore(grants []time.Time, t time.Time) int {
	i, _ := slices.BinarySearchFunc(grants, t, func(g, t time.Time) int { return g.Compare(t) })
	return i
}

func countOver(ds []time.Duration, d time.Duration) int {
	n := 0
	for _, x := range ds {
		if x > d {
			n++
		}
	}
	return n
}
