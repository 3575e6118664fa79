package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	postgreskind "github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
	"github.com/lockbench/lockbench/remote"
)

func TestSplitKeepalive(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want keepalive // zero: refused
	}{
		{3 * time.Second, keepalive{Idle: time.Second, Interval: time.Second, Count: 2, UserTimeout: 3 * time.Second}},
		{4 * time.Second, keepalive{Idle: 2 * time.Second, Interval: time.Second, Count: 2, UserTimeout: 4 * time.Second}},
		{10 * time.Second, keepalive{Idle: 4 * time.Second, Interval: 3 * time.Second, Count: 2, UserTimeout: 10 * time.Second}},
		{time.Hour, keepalive{Idle: 20 * time.Minute, Interval: 20 * time.Minute, Count: 2, UserTimeout: time.Hour}},
		{2 * time.Second, keepalive{}},
		{3500 * time.Millisecond, keepalive{}},
		{-time.Minute, keepalive{}},
	} {
		k, err := splitKeepalive(tc.d)
		if tc.want == (keepalive{}) {
			if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tc.d.String()) {
				t.Errorf("splitKeepalive(%v) = %+v, %v; want ErrInvalid naming it", tc.d, k, err)
			}
			continue
		}
		if err != nil || k != tc.want || k.Idle+time.Duration(k.Count)*k.Interval != tc.d {
			t.Errorf("splitKeepalive(%v) = %+v, %v; want %+v, adding up to it", tc.d, k, err, tc.want)
		}
	}
}

// TestKeepaliveInfo: a keepalive bound caps what an advisory lease
// promises, and what it reports, whatever TTL it asked.
func TestKeepaliveInfo(t *testing.T) {
	l := open(t, "db.example:5433", Advisory, map[string]string{"keepalive": "3s"})
	defer l.Close()
	info := l.Info()
	if want := 3*time.Second - drift(3*time.Second); info.Session != want || info.Promise(time.Hour) != want || info.Promise(time.Second) != time.Second {
		t.Fatalf("Info.Session %v, Promise(1h) %v, Promise(1s) %v; want %v, %v, 1s", info.Session, info.Promise(time.Hour), info.Promise(time.Second), want, want)
	}
	if !strings.Contains(info.Guarantee, "keepalive 3s") {
		t.Fatalf("guarantee %q does not name the keepalive", info.Guarantee)
	}
	plain := open(t, "db.example:5433", Advisory, nil)
	defer plain.Close()
	if s := plain.Info().Session; s != 0 {
		t.Fatalf("Info.Session %v without a keepalive, want 0", s)
	}
	if _, err := New(l.pool, Options{Mode: Advisory, Keepalive: 4 * time.Second}); !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "4s") {
		t.Fatalf("New with a keepalive the pool does not set = %v, want ErrInvalid naming it", err)
	}
}

// TestKeepaliveAutoExtend: a lease that asked for an hour and extends
// itself under keepalive=3s runs with the bound as its TTL, so that its
// watchdog extends it in time: it outlives the bound, its ValidUntil
// moving, never beyond the bound from now.
func TestKeepaliveAutoExtend(t *testing.T) {
	l := open(t, shared.Get(t), Advisory, map[string]string{"keepalive": "3s"})
	t.Cleanup(func() { l.Close() })
	lease := locktest.MustAcquire(t, l, "keepalive:auto", locker.WithTTL(time.Hour), locker.WithAutoExtend(true))
	first := lease.ValidUntil()
	select {
	case <-lease.Done():
		t.Fatalf("the auto-extended lease ended within 4 s: %v", lease.Err())
	case <-time.After(4 * time.Second): // past the bound
	}
	if v := lease.ValidUntil(); !v.After(first) || time.Until(v) > l.session {
		t.Fatalf("ValidUntil %v after 4 s (first %v): want it moved, within %v of now", time.Until(v), time.Until(first), l.session)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisoryKeepaliveUnderCut cuts two holders of advisory locks off
// from the server, in a network namespace of its own, as a partition does
// (packets dropped both ways, no clean close): one opened with
// keepalive=3s, one with the server's settings. A client on the server's
// side of the cut (psql, in the server's namespace) tries the locks:
//
//   - keepalive=3s: the server ends the silent session, and frees its
//     lock, within the bound; the holder's lease, which asked for an hour,
//     promised no more than the bound from its grant, and had ended
//     (ErrExpired) before the lock was free;
//   - the server's settings (Linux's: 2 h 11 min): the lock stays taken
//     after the other is long free, and the holder's lease, within its
//     hour, does not know that it is cut off.
func TestAdvisoryKeepaliveUnderCut(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	n := server(t, compose.Spec{Netns: true, Durability: compose.DurabilityFast}, postgreskind.Options{})
	bounded, plain := open(t, n.Addr(), Advisory, map[string]string{"keepalive": "3s"}), open(t, n.Addr(), Advisory, nil)
	t.Cleanup(func() { plain.Close(); bounded.Close() })
	ctx := context.Background()

	// The server applied the session settings.
	var got []string
	rows, err := bounded.pool.Query(ctx, `SELECT name || '=' || setting FROM pg_settings WHERE name IN
		('tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout') ORDER BY name`)
	if err == nil {
		for rows.Next() {
			var s string
			if err = rows.Scan(&s); err != nil {
				break
			}
			got = append(got, s)
		}
		rows.Close()
		err = rows.Err()
	}
	if want := "tcp_keepalives_count=2 tcp_keepalives_idle=1 tcp_keepalives_interval=1 tcp_user_timeout=3000"; err != nil || strings.Join(got, " ") != want {
		t.Fatalf("the server's session settings: %v, %v; want %s", got, err, want)
	}

	lb := locktest.MustAcquire(t, bounded, "cut:bounded", locker.WithTTL(time.Hour))
	granted := time.Now()
	lp := locktest.MustAcquire(t, plain, "cut:plain", locker.WithTTL(time.Hour))
	if left := time.Until(lb.ValidUntil()); left > bounded.session {
		t.Fatalf("a lease asking for an hour under keepalive=3s is valid for %v, beyond the bound %v", left, bounded.session)
	}
	ended := make(chan time.Time, 1)
	go func() { <-lb.Done(); ended <- time.Now() }()
	for _, key := range []string{"cut:bounded", "cut:plain"} {
		if free := tryInside(t, n, key); free {
			t.Fatalf("%q is free before the cut", key)
		}
	}

	if err := n.CutClients(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	t.Cleanup(func() {
		if n.ClientsCut() {
			n.HealClients()
		}
	})
	// The server frees the lock 3 s after it last heard from the holder,
	// by its kernel's timers; the slack is for a loaded machine's psql.
	var polled, freed time.Time // the free poll's start and end
	for deadline := cut.Add(3*time.Second + 15*time.Second); freed.IsZero(); {
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off holder's lock under keepalive=3s is still taken %v after the cut", time.Since(cut).Round(time.Millisecond))
		}
		polled = time.Now()
		if tryInside(t, n, "cut:bounded") {
			freed = time.Now()
		}
	}
	t.Logf("keepalive=3s: the server freed the cut-off holder's lock %v–%v after the cut (%v–%v after the grant; it counts from the holder's last word, its last keepalive probe if it sent one after the grant)",
		polled.Sub(cut).Round(time.Millisecond), freed.Sub(cut).Round(time.Millisecond), polled.Sub(granted).Round(time.Millisecond), freed.Sub(granted).Round(time.Millisecond))
	// The contract: the server frees the lock no sooner than the lease's
	// ValidUntil (the poll's end is after the lock went; the lease's end,
	// as a goroutine sees it, may lag on a loaded machine).
	if validUntil := lb.ValidUntil(); !validUntil.Before(freed) {
		t.Fatalf("the lock was seen free %v after the cut, before the holder's lease ran out (%v after)", freed.Sub(cut), validUntil.Sub(cut))
	}
	err = locktest.WaitDone(t, lb, 10*time.Second)
	at := <-ended
	t.Logf("keepalive=3s: the holder's lease ended %v after the cut (%v before the lock was seen free): %v",
		at.Sub(cut).Round(time.Millisecond), freed.Sub(at).Round(time.Millisecond), err)
	if !errors.Is(err, locker.ErrExpired) {
		t.Fatalf("the cut-off holder's lease ended with %v, want ErrExpired", err)
	}
	if tryInside(t, n, "cut:plain") {
		t.Fatalf("the lock of the holder with the server's keepalives went %v after the cut", time.Since(cut).Round(time.Millisecond))
	}
	if lp.Err() != nil {
		t.Fatalf("the hour-long lease of the holder with the server's keepalives ended: %v", lp.Err())
	}
	t.Logf("server's keepalives: the cut-off holder's lock is still taken %v after the cut, and its lease holds", time.Since(cut).Round(time.Millisecond))

	if err := n.HealClients(); err != nil {
		t.Fatal(err)
	}
	// The plain holder's session lived through the cut.
	if err := lp.Release(ctx); err != nil {
		t.Fatalf("release after the cut healed: %v", err)
	}
	next := locktest.MustAcquire(t, plain, "cut:bounded", locker.WithTTL(time.Minute))
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// tryInside reports whether key's advisory lock is free, as a client in
// n's network namespace — on the server's side of any cut of its clients
// — finds it: psql takes it if it can (and gives it back as it leaves).
func tryInside(t *testing.T, n *compose.Node, key string) bool {
	t.Helper()
	bin, err := postgreskind.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err = n.Host().Run(ctx, remote.Cmd{
		Path:   filepath.Join(filepath.Dir(bin), "psql"),
		Args:   []string{"-XAtq", "-d", postgreskind.URL(n.ServerAddr()), "-c", fmt.Sprintf("SELECT pg_try_advisory_lock(%d)", keyID(key))},
		Stdout: &out, Stderr: &errOut,
	})
	if err != nil {
		t.Fatalf("psql in %s's namespace: %v: %s", n.Name, err, errOut.String())
	}
	switch s := strings.TrimSpace(out.String()); s {
	case "t":
		return true
	case "f":
		return false
	default:
		t.Fatalf("psql in %s's namespace: pg_try_advisory_lock answered %q", n.Name, s)
	}
	return false
}
