package judge

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
)

// pauses returns the pause ops of a result's history, and the kind of
// op the judge recorded just before each.
func pauses(r *Result) (ps []history.Op, after []history.Func) {
	for i, o := range r.Ops {
		if o.F == history.Pause {
			ps = append(ps, o)
			after = append(after, r.Ops[i-1].F)
		}
	}
	return ps, after
}

func TestSectionPausesLandAtTheirPoint(t *testing.T) {
	for i, tc := range []struct {
		at    history.Point
		after history.Func // the op the judge records just before the pause
	}{
		{history.PointBeforeRead, history.Acquire},
		{"", history.Read},
		{history.PointAfterRead, history.Read},
		{history.PointAfterWrite, history.Write},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			id := "p" + string(rune('0'+i))
			j := served(t, Options{})
			info, err := j.Open(context.Background(), "h", spec(id, 1))
			if err != nil {
				t.Fatal(err)
			}
			p := &recordingPauser{}
			j.Case(id).SetHooks(func(SectionEvent) Action { return Action{Pause: time.Second, At: tc.at} }, p)
			a := dialClient(t, j, id, "h", 0)
			start(t, a)
			g := a.grant(info.KeyPrefix+"hot", 1, time.Second)
			a.finishSection(info.KeyPrefix+"hot", g.Section)
			a.done(1)
			r, err := j.Finish(context.Background(), "h", id)
			if err != nil {
				t.Fatal(err)
			}
			ps, after := pauses(r)
			want := tc.at
			if want == "" {
				want = history.PointAfterRead
			}
			if len(ps) != 1 || after[0] != tc.after || ps[0].Point != want || ps[0].Section != g.Section || ps[0].Length != int64(time.Second) {
				t.Fatalf("pauses %+v recorded after %v, want one at %s after the %s", ps, after, want, tc.after)
			}
			if l := r.Reports[GuardNone].Pauses; len(l) != 1 || l[0].Landed != want || !l[0].Hit() {
				t.Fatalf("landings %+v, want one at %s", l, want)
			}
		})
	}
}

func TestLiveViewAndExtensions(t *testing.T) {
	j := served(t, Options{})
	info, err := j.Open(context.Background(), "h", spec("live", 2))
	if err != nil {
		t.Fatal(err)
	}
	c := j.Case("live")
	p := &recordingPauser{}
	c.SetHooks(nil, p)
	a, b := dialClient(t, j, "live", "h", 0), dialClient(t, j, "live", "h", 1)
	if err := c.Pause(0, time.Second, history.PointAcquire); err == nil {
		t.Fatal("a pause before the start was carried out")
	}
	start(t, a, b)
	if acq := c.Acquiring(); len(acq) != 2 {
		t.Fatalf("acquiring %v after the start, want both clients", acq)
	}
	key := info.KeyPrefix + "hot"
	g := a.grant(key, 1, time.Second)
	if acq := c.Acquiring(); len(acq) != 1 || acq[1] < 0 {
		t.Fatalf("acquiring %v once client 0 holds, want client 1 alone", acq)
	}
	if h := c.Holding(); len(h) != 1 || h[0].Process != 0 || h[0].Section != g.Section || h[0].Key != key || h[0].Granted <= 0 {
		t.Fatalf("holding %+v, want client 0's section %d", h, g.Section)
	}
	if err := c.Pause(1, time.Second, history.PointAcquire); err != nil {
		t.Fatal(err)
	}
	// The lease's watchdog begins an extension: whoever awaits one hears.
	ctx := context.Background()
	heard := make(chan Held, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		h, err := c.AwaitExtending(actx)
		if err != nil {
			t.Error(err)
		}
		heard <- h
	}()
	for {
		if err := a.conn.Extending(ctx, g.Section); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-heard:
			if h.Process != 0 || h.Section != g.Section || h.Extending <= 0 {
				t.Fatalf("heard of %+v, want client 0's section %d extending", h, g.Section)
			}
		case <-time.After(10 * time.Millisecond):
			continue // the waiter was not waiting yet: say it again
		}
		break
	}
	if err := b.conn.Extending(ctx, g.Section); err == nil {
		t.Fatal("client 1 said it extends client 0's section")
	}
	// The extension returned: reported by its holder.
	now := time.Now()
	ext := OpReport{F: history.Extend, Type: history.OK, Key: key, Section: g.Section,
		Invoke: now.Add(-3 * time.Millisecond).UnixNano(), Complete: now.Add(-time.Millisecond).UnixNano(),
		ValidUntil: now.Add(time.Second).UnixNano(), Promise: int64(time.Second), MaxValidity: int64(time.Second)}
	if err := a.conn.Report(ctx, ext); err != nil {
		t.Fatal(err)
	}
	if err := b.conn.Report(ctx, ext); err == nil {
		t.Fatal("client 1 reported an extension of client 0's section")
	}
	if h := c.Holding(); len(h) != 1 || h[0].Extended <= h[0].Returned {
		t.Fatalf("holding %+v after an extension, want it returned after the grant", h)
	}
	a.finishSection(key, g.Section)
	if acq := c.Acquiring(); len(acq) != 2 {
		t.Fatalf("acquiring %v after client 0 released, want both", acq)
	}
	a.done(1)
	b.done(0)
	r, err := j.Finish(ctx, "h", "live")
	if err != nil {
		t.Fatal(err)
	}
	var e *history.Op
	for i := range r.Ops {
		if r.Ops[i].F == history.Extend {
			e = &r.Ops[i]
		}
	}
	if e == nil || e.Promise != int64(time.Second) || e.WorkerValidUntil != ext.ValidUntil || e.ValidUntil <= 0 || e.Invoke > e.Complete {
		t.Fatalf("extension recorded as %+v", e)
	}
	ps, _ := pauses(r)
	if len(ps) != 1 || ps[0].Process != 1 || ps[0].Point != history.PointAcquire || ps[0].Section != 0 {
		t.Fatalf("pauses %+v, want client 1's, aimed inside Acquire", ps)
	}
	if rep := r.Reports[GuardNone]; rep.Extends != 1 || len(rep.Pauses) != 1 || rep.Pauses[0].Landed != history.PointIdle {
		// Client 1 reported no acquire at all: from the start it was idle
		// (it never called Acquire).
		t.Fatalf("report: %d extensions, pauses %+v", rep.Extends, rep.Pauses)
	}
}
