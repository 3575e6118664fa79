package judge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served returns a judge listening on a free loopback port, closed when
// the test ends.
func served(t *testing.T, o Options) *Judge {
	t.Helper()
	j, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// openRemote dials j as a runner with opts and opens case id there for
// one process of host "control"; the runner closes when the test ends.
func openRemote(t *testing.T, j *Judge, id string, opts ...DialOption) (*Remote, CaseInfo) {
	t.Helper()
	ctx := context.Background()
	r, err := DialRemote(ctx, j.Addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	info, err := r.Open(ctx, "control", spec(id, 1))
	if err != nil {
		t.Fatal(err)
	}
	return r, info
}

// remotePeer connects a nemesis peer to case info through r until end is
// called or the test ends.
func remotePeer(t *testing.T, r *Remote, info CaseInfo) (_ Peer, end context.CancelFunc) {
	t.Helper()
	ctx, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	peer, err := r.Peer(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	return peer, end
}

func spec(id string, n int) CaseSpec {
	return CaseSpec{ID: id, Guards: []Guard{GuardNone, GuardFence}, Processes: n, Duration: time.Minute, TimelineStep: 100 * time.Millisecond}
}

// client is one client's line with its test helpers.
type client struct {
	t    *testing.T
	conn Conn
	p    int
}

func dialClient(t *testing.T, j *Judge, id, host string, p int) *client {
	t.Helper()
	conn, err := Dial(context.Background(), j.Addr(), id, host, p, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, p: p}
}

// grant reports a lease of key with token tok, valid for validFor, and
// a contract that promised as much.
func (c *client) grant(key string, tok uint64, validFor time.Duration) Grant {
	c.t.Helper()
	now := time.Now()
	g, err := c.conn.Grant(context.Background(), GrantReport{Key: key, Token: tok, HasToken: tok > 0,
		ValidUntil: now.Add(validFor).UnixNano(), Invoke: now.Add(-time.Millisecond).UnixNano(), Complete: now.UnixNano(),
		Promise: int64(validFor), MaxValidity: int64(validFor)})
	if err != nil {
		c.t.Fatal(err)
	}
	return g
}

// finishSection runs read, write, end and release of section s.
func (c *client) finishSection(key string, s int64) {
	c.t.Helper()
	ctx := context.Background()
	if err := c.conn.Read(ctx, s); err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.Write(ctx, s); err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.End(ctx, s); err != nil {
		c.t.Fatal(err)
	}
	now := time.Now().UnixNano()
	if err := c.conn.Report(ctx, OpReport{F: history.Release, Type: history.OK, Key: key, Section: s, Invoke: now, Complete: now}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) done(acquired int64) {
	c.t.Helper()
	if err := c.conn.Done(context.Background(), Metrics{Acquired: acquired}); err != nil {
		c.t.Fatal(err)
	}
}

// start runs Ready on every client at once and waits for the barrier.
func start(t *testing.T, cs ...*client) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() { _, errs[i] = c.conn.Ready(context.Background()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestClientsTakeTurnsOverTheNetwork(t *testing.T) {
	out := t.TempDir()
	j := served(t, Options{Out: out, RunID: "run1"})
	info, err := j.Open(context.Background(), "h", spec("001", 2))
	if err != nil {
		t.Fatal(err)
	}
	if info.KeyPrefix != "lockbench:run1:001:" || info.FirstProcess != 0 {
		t.Fatalf("case info %+v", info)
	}
	a, b := dialClient(t, j, "001", "h", 0), dialClient(t, j, "001", "h", 1)
	start(t, a, b)
	key := info.KeyPrefix + "hot"
	for i := range 4 {
		c := []*client{a, b}[i%2]
		g := c.grant(key, uint64(i+1), time.Second)
		c.finishSection(key, g.Section)
	}
	a.done(2)
	b.done(2)
	r, err := j.Finish(context.Background(), "h", "001")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []Guard{GuardNone, GuardFence} {
		if rep := r.Reports[g]; rep.Sections != 4 || rep.Violations() != 0 || rep.Accepted != 4 {
			t.Fatalf("guard %s: report %+v", g, rep)
		}
	}
	if r.Linearizable.Result != results.Linearizable || r.LinearizableFenced.Result != results.Linearizable {
		t.Fatalf("verdicts %+v %+v", r.Linearizable, r.LinearizableFenced)
	}
	if r.Metrics.Acquired != 4 || r.Processes != 2 {
		t.Fatalf("metrics %+v, processes %d", r.Metrics, r.Processes)
	}
	var grants int64
	for _, n := range r.Timeline {
		grants += n
	}
	if grants != 4 {
		t.Fatalf("timeline %v counts %d grants", r.Timeline, grants)
	}
	ops, err := history.ReadFile(filepath.Join(out, r.History))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4*7 { // acquire, read and write in each of the 2 stores, end, release
		t.Fatalf("history has %d ops, want 28", len(ops))
	}
	for _, o := range ops {
		if o.Invoke > o.Complete {
			t.Errorf("op %v invoked at %d after it completed at %d", o, o.Invoke, o.Complete)
		}
		if o.F == history.Acquire && (o.ValidUntil <= o.Complete || o.ValidUntil > o.Complete+int64(2*time.Second)) {
			t.Errorf("op %v: validity %d is not about a second after the grant at %d", o, o.ValidUntil, o.Complete)
		}
	}
}

func TestOverlapBetweenProcessesIsCounted(t *testing.T) {
	j := served(t, Options{})
	info, err := j.Open(context.Background(), "h", spec("002", 2))
	if err != nil {
		t.Fatal(err)
	}
	a, b := dialClient(t, j, "002", "h", 0), dialClient(t, j, "002", "h", 1)
	start(t, a, b)
	key := info.KeyPrefix + "hot"
	ga := a.grant(key, 0, time.Minute)
	gb := b.grant(key, 0, time.Minute) // while a holds, and a's lease is valid
	b.finishSection(key, gb.Section)
	a.finishSection(key, ga.Section)
	a.done(1)
	b.done(1)
	r, err := j.Finish(context.Background(), "h", "002")
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Reports[GuardNone]; rep.Overlaps != 1 || rep.OverlapsLockBug != 1 || rep.Incidents != 1 || rep.StaleAccepted != 1 {
		t.Fatalf("report %+v", rep)
	}
	if r.Linearizable.Result != results.NotLinearizable {
		t.Fatalf("mutex verdict %+v", r.Linearizable)
	}
}

// recordingPauser notes the pauses it was asked for.
type recordingPauser struct {
	mu     sync.Mutex
	pauses []int
}

func (p *recordingPauser) Pause(process int, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pauses = append(p.pauses, process)
	return nil
}

func TestSectionHookHoldsAndPauses(t *testing.T) {
	j := served(t, Options{})
	info, err := j.Open(context.Background(), "h", spec("003", 1))
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingPauser{}
	j.Case("003").SetHooks(func(e SectionEvent) Action {
		if e.ValidFor <= 0 || e.ValidFor > time.Second {
			t.Errorf("section %d valid for %v, want about a second", e.Section, e.ValidFor)
		}
		return Action{Hold: 3 * time.Second, Pause: time.Second}
	}, p)
	a := dialClient(t, j, "003", "h", 0)
	start(t, a)
	g := a.grant(info.KeyPrefix+"hot", 1, time.Second)
	if g.Hold != 3*time.Second {
		t.Fatalf("hold %v, want the hook's 3s", g.Hold)
	}
	p.mu.Lock()
	before := len(p.pauses)
	p.mu.Unlock()
	a.finishSection(info.KeyPrefix+"hot", g.Section)
	a.done(1)
	if _, err := j.Finish(context.Background(), "h", "003"); err != nil {
		t.Fatal(err)
	}
	if before != 0 || len(p.pauses) != 1 || p.pauses[0] != 0 {
		t.Fatalf("pauses before the read %d, after %v: want none, then process 0 once", before, p.pauses)
	}
}

func TestAClientThatDiesInsideItsSectionEndsIt(t *testing.T) {
	j := served(t, Options{})
	info, err := j.Open(context.Background(), "h", spec("004", 2))
	if err != nil {
		t.Fatal(err)
	}
	a, b := dialClient(t, j, "004", "h", 0), dialClient(t, j, "004", "h", 1)
	start(t, a, b)
	key := info.KeyPrefix + "hot"
	a.grant(key, 1, time.Second)
	a.conn.Close() // the process died holding the key
	// b waits until the judge has noticed, then takes the key.
	c := j.Case("004")
	for !waitFor(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.procs[0].finished
	}) {
	}
	g := b.grant(key, 2, time.Second)
	b.finishSection(key, g.Section)
	b.done(1)
	r, err := j.Finish(context.Background(), "h", "004")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Dead) != 1 || r.Reports[GuardFence].Overlaps != 0 || r.Linearizable.Result != results.Linearizable {
		t.Fatalf("dead %v, report %+v, verdict %+v", r.Dead, r.Reports[GuardFence], r.Linearizable)
	}
}

// waitFor polls cond for up to a millisecond, yielding in between; the
// caller loops. It lets a test wait for the judge's connection goroutine
// without sleeping for a guessed time.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(time.Millisecond)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
	}
	return false
}

func TestTwoHostsShareACase(t *testing.T) {
	j := served(t, Options{Hosts: 2})
	r, err := DialRemote(context.Background(), j.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	infos := make([]CaseInfo, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { infos[0], errs[0] = j.Open(context.Background(), "a", spec("005", 1)) })
	wg.Go(func() { infos[1], errs[1] = r.Open(context.Background(), "b", spec("005", 1)) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if infos[0].KeyPrefix != infos[1].KeyPrefix || infos[0].FirstProcess == infos[1].FirstProcess {
		t.Fatalf("hosts got %+v and %+v: want one key prefix, distinct processes", infos[0], infos[1])
	}
	ca := dialClient(t, j, "005", "a", infos[0].FirstProcess)
	cb := dialClient(t, j, "005", "b", infos[1].FirstProcess)
	start(t, ca, cb)
	key := infos[0].KeyPrefix + "hot"
	ga := ca.grant(key, 0, time.Minute)
	gb := cb.grant(key, 0, time.Minute) // two hosts hold the key at once
	ca.finishSection(key, ga.Section)
	cb.finishSection(key, gb.Section)
	ca.done(1)
	cb.done(5)
	res := make([]*Result, 2)
	wg.Go(func() { res[0], errs[0] = j.Finish(context.Background(), "a", "005") })
	wg.Go(func() { res[1], errs[1] = r.Finish(context.Background(), "b", "005") })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, x := range res {
		if x.Reports[GuardNone].Overlaps != 1 || x.All.Acquired != 6 {
			t.Errorf("host %d: overlaps %d, all acquired %d: want the joint 1 and 6", i, x.Reports[GuardNone].Overlaps, x.All.Acquired)
		}
	}
	if res[0].Metrics.Acquired != 1 || res[1].Metrics.Acquired != 5 {
		t.Errorf("own metrics %d and %d, want 1 and 5", res[0].Metrics.Acquired, res[1].Metrics.Acquired)
	}
}

func TestBadCallsAreRefused(t *testing.T) {
	j := served(t, Options{})
	if _, err := j.Open(context.Background(), "h", CaseSpec{ID: "x", Guards: []Guard{"fencing"}, Processes: 0}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad spec: %v", err)
	}
	if _, err := j.Open(context.Background(), "h", spec("006", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), j.Addr(), "006", "h", 7, 0); !errors.Is(err, ErrProtocol) {
		t.Fatalf("hello of a process the host does not have: %v", err)
	}
	if _, err := Dial(context.Background(), j.Addr(), "nope", "h", 0, 0); !errors.Is(err, ErrProtocol) {
		t.Fatalf("hello to a case not open: %v", err)
	}
	a := dialClient(t, j, "006", "h", 0)
	if _, err := a.conn.Grant(context.Background(), GrantReport{Key: "k"}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("grant before the start: %v", err)
	}
	start(t, a)
	g := a.grant("k", 0, time.Second)
	if err := a.conn.Write(context.Background(), g.Section); !errors.Is(err, ErrProtocol) {
		t.Fatalf("write before read: %v", err)
	}
	now := time.Now().UnixNano()
	leaseEnd := OpReport{F: history.LeaseEnd, Type: history.OK, Key: "k", Section: g.Section, Invoke: now, Complete: now, Error: "lock expired"}
	if err := a.conn.Report(context.Background(), leaseEnd); err != nil {
		t.Fatalf("the lease's end inside the section: %v", err)
	}
	a.finishSection("k", g.Section)
	if err := a.conn.Report(context.Background(), leaseEnd); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a lease end after the section ended: %v", err)
	}
	a.done(1)
	r, err := j.Finish(context.Background(), "h", "006")
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Reports[GuardNone].LeaseEnds; n != 1 {
		t.Fatalf("%d lease ends in the history, want 1", n)
	}
}

func TestAClientMissingAtTheStartCancelsTheCase(t *testing.T) {
	j := served(t, Options{})
	if _, err := j.Open(context.Background(), "h", spec("007", 2)); err != nil {
		t.Fatal(err)
	}
	a := dialClient(t, j, "007", "h", 0)
	ready := make(chan error, 1)
	go func() { _, err := a.conn.Ready(context.Background()); ready <- err }()
	j.Gone("007", 1, "its process exited with status 1")
	if err := <-ready; err == nil {
		t.Fatal("the barrier let a client start without its peer")
	}
	if _, err := j.Finish(context.Background(), "h", "007"); err == nil {
		t.Fatal("Finish of a cancelled case returned a result")
	}
}

// TestWhatTheJudgeCannotRecordIsSaid runs a case whose history cannot be
// written (its run dir is a file) on a judge whose Finished fails: the
// verdicts stand, and every host's result says what is missing and why.
func TestWhatTheJudgeCannotRecordIsSaid(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []CaseSpec
	j := served(t, Options{Out: notDir, Finished: func(s CaseSpec, r *Result) error {
		got = append(got, s)
		return errors.New("disk full")
	}})
	rec := &results.Case{Backend: "noop", Fault: "none"}
	s := spec("008", 1)
	s.Record = rec
	info, err := j.Open(context.Background(), "h", s)
	if err != nil {
		t.Fatal(err)
	}
	a := dialClient(t, j, "008", "h", 0)
	start(t, a)
	g := a.grant(info.KeyPrefix+"hot", 1, time.Second)
	a.finishSection(info.KeyPrefix+"hot", g.Section)
	a.done(1)
	r, err := j.Finish(context.Background(), "h", "008")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Record != rec {
		t.Fatalf("Finished had %+v: want the case once, with the runner's record", got)
	}
	if r.Linearizable.Result != results.Linearizable || r.History != "" || len(r.Unrecorded) != 2 ||
		!strings.HasPrefix(r.Unrecorded[0], "history not written") || !strings.HasSuffix(r.Unrecorded[1], "disk full") {
		t.Fatalf("verdict %s, history %q, unrecorded %q: want the verdict, no history, and both failures said",
			r.Linearizable.Result, r.History, r.Unrecorded)
	}
}
