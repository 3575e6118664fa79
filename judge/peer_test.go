package judge

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

// TestRemotePeer: a nemesis on another host than the judge is its peer
// over the wire, with the run's token: the judge asks it about each grant
// (its hold comes back to the client) and has it carry out the pauses it
// asks for, its live view and clients in Acquire reach it, its own pause
// is recorded, Enough stops the clients, and the injections it reports
// reach the judge's result and its Finished record. A hooks connection
// without the token is refused.
func TestRemotePeer(t *testing.T) {
	const token = "peer-token-91c2"
	var mu sync.Mutex
	var recorded *Injections
	var log syncBuffer
	j := served(t, Options{Token: token, Log: &log, Finished: func(_ CaseSpec, r *Result) error {
		mu.Lock()
		defer mu.Unlock()
		recorded = r.Injections
		return nil
	}})
	ctx := context.Background()
	r, info := openRemote(t, j, "001", Token(token))
	peer, endPeer := remotePeer(t, r, info)
	if peer.KeyPrefix() != info.KeyPrefix {
		t.Errorf("key prefix %q, want %q", peer.KeyPrefix(), info.KeyPrefix)
	}
	pauser := &recordingPauser{}
	var events []SectionEvent
	peer.SetHooks(func(e SectionEvent) Action {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
		return Action{Hold: 3 * time.Second, Pause: time.Second, At: history.PointBeforeRead}
	}, pauser)

	// A stranger's hooks: refused, and named in the log.
	conn, err := net.Dial("tcp", j.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"op":"hooks","case":"001"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(conn).ReadString('\n'); !strings.Contains(line, `"refused":true`) {
		t.Errorf("a stranger's hooks got %q", line)
	}

	c, err := Dial(ctx, j.Addr(), "001", "control", info.FirstProcess, os.Getpid(), Token(token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := time.Now()
	if _, err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-peer.Started():
	case <-time.After(time.Minute):
		t.Fatal("the peer never saw the start barrier")
	}
	if s := peer.Start(); s.IsZero() || s.Before(before.Add(-time.Second)) || s.After(time.Now().Add(time.Second)) {
		t.Errorf("start %v, want between %v and now (the same clock here)", s, before)
	}
	if acq := peer.Acquiring(); len(acq) != 1 {
		t.Errorf("clients in Acquire %v, want the one client", acq)
	}
	now := time.Now()
	g, err := c.Grant(ctx, GrantReport{Key: info.KeyPrefix + "hot", Invoke: now.UnixNano(), Complete: now.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if g.Hold != 3*time.Second {
		t.Errorf("hold %v, want the remote hook's 3s", g.Hold)
	}
	live := peer.Live()
	if live.Grants != 1 || len(live.Open) != 1 || live.Open[0].Key != info.KeyPrefix+"hot" || live.Open[0].Process != info.FirstProcess {
		t.Errorf("live view %+v, want the one open section of the client", live)
	}
	if err := peer.Pause(info.FirstProcess, time.Second, history.PointAcquire); err != nil {
		t.Errorf("the nemesis's own pause: %v", err)
	}
	pauser.mu.Lock()
	paused := len(pauser.pauses)
	pauser.mu.Unlock()
	if paused != 2 {
		t.Errorf("the pauser ran %d pauses, want 2 (the hook's, then the nemesis's own)", paused)
	}
	peer.Enough()
	if err := c.Read(ctx, g.Section); err != nil {
		t.Fatal(err)
	}
	if !c.Stopping() {
		t.Error("after Enough the client is not told to stop")
	}
	if err := c.End(ctx, g.Section); err != nil {
		t.Fatal(err)
	}
	if err := c.Done(ctx, Metrics{Acquired: 1}); err != nil {
		t.Fatal(err)
	}
	yes := true
	sent := Injections{Windows: []results.Window{{Label: "pause", StartS: 0.1, EndS: 1.1}},
		Targets: []results.Target{{Injection: 1, Nodes: []string{"redis-0"}, Hosts: []string{"host1"}, Tested: &yes}}}
	if err := peer.Injected(sent); err != nil {
		t.Fatal(err)
	}
	res, err := r.Finish(ctx, "control", "001")
	if err != nil {
		t.Fatal(err)
	}
	endPeer()
	if res.Injections == nil || len(res.Injections.Targets) != 1 || res.Injections.Targets[0].Hosts[0] != "host1" {
		t.Errorf("the result's injections %+v, want the nemesis's", res.Injections)
	}
	mu.Lock()
	defer mu.Unlock()
	if recorded == nil || len(recorded.Windows) != 1 {
		t.Errorf("the judge's record of the injections %+v, want the nemesis's", recorded)
	}
	if len(events) != 1 || events[0].Process != info.FirstProcess {
		t.Errorf("the hook heard %+v, want the one grant", events)
	}
	if !strings.Contains(log.String(), "judge: refused") {
		t.Errorf("the stranger is not named in the log: %q", log.String())
	}
}

// TestRemotePeerOfAGoneJudge: a peer whose judge has closed sees an empty
// view and says why, and its hook line ends: nothing hangs.
func TestRemotePeerOfAGoneJudge(t *testing.T) {
	j := served(t, Options{})
	r, info := openRemote(t, j, "002")
	peer, _ := remotePeer(t, r, info)
	j.Close()
	select {
	case <-peer.Started():
	case <-time.After(time.Minute):
		t.Fatal("the wait for the start outlived the judge")
	}
	if !peer.Start().IsZero() {
		t.Error("a start from a judge that closed before it")
	}
	if l := peer.Live(); l.Grants != 0 || len(l.Open) != 0 {
		t.Errorf("live view %+v from a closed judge", l)
	}
	if err := peer.(*RemotePeer).Err(); err == nil {
		t.Error("no error from a closed judge")
	}
	if err := peer.Injected(Injections{}); err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("injections to a closed judge: %v, want the connection's error", err)
	}
}
