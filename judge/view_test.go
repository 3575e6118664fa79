package judge

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLiveShowsOpenSectionsAndEnoughEndsTheCase: the live view lists the
// sections open now with their grants, and the last grant; a case ended
// by Enough stops its clients without reading "stopped early".
func TestLiveShowsOpenSectionsAndEnoughEndsTheCase(t *testing.T) {
	j := served(t, Options{RunID: "live"})
	info, err := j.Open(context.Background(), "h", spec("001", 2))
	if err != nil {
		t.Fatal(err)
	}
	c := j.Case("001")
	if got := c.KeyPrefix(); got != info.KeyPrefix {
		t.Fatalf("KeyPrefix %q, the case info says %q", got, info.KeyPrefix)
	}
	if l := c.Live(); l.Grants != 0 || len(l.Open) != 0 {
		t.Fatalf("live view before the start: %+v", l)
	}
	a, b := dialClient(t, j, "001", "h", 0), dialClient(t, j, "001", "h", 1)
	start(t, a, b)
	key := info.KeyPrefix + "hot"
	ga := a.grant(key, 1, time.Second)
	gb := b.grant(key, 2, time.Second)
	l := c.Live()
	if l.Grants != 2 || len(l.Open) != 2 || l.Open[0].Section != ga.Section || l.Open[1].Section != gb.Section ||
		l.Open[0].Process != 0 || l.Open[1].Key != key || l.LastGrant != l.Open[1].Granted || l.Open[0].Granted > l.Open[1].Granted {
		t.Fatalf("live view with two sections open: %+v", l)
	}
	if c.Since(l.LastGrant) < 0 {
		t.Fatalf("the last grant is %v in the future", -c.Since(l.LastGrant))
	}
	a.finishSection(key, ga.Section)
	if l := c.Live(); len(l.Open) != 1 || l.Open[0].Section != gb.Section {
		t.Fatalf("live view after section %d ended: %+v", ga.Section, l)
	}
	c.Enough()
	b.finishSection(key, gb.Section)
	if !b.conn.Stopping() {
		t.Fatal("a client answered after Enough is not told to stop")
	}
	a.done(1)
	b.done(1)
	r, err := j.Finish(context.Background(), "h", "001")
	if err != nil {
		t.Fatal(err)
	}
	if r.Stopped != "" || r.Elapsed >= r.Duration {
		t.Fatalf("a case ended by Enough: stopped %q, elapsed %v of %v", r.Stopped, r.Elapsed, r.Duration)
	}
	if strings.Contains(r.Stopped, "early") {
		t.Fatal("Enough reads as an early stop")
	}
}
