package remote_test

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// reaches reports whether from's host completes a TCP handshake with
// addr:22 (every lab host's sshd) within 2 s: what a cut must prevent.
func reaches(t *testing.T, ctx context.Context, from remote.Remote, to netip.Addr) bool {
	t.Helper()
	_, err := remote.Output(ctx, from, "timeout", "2", "bash", "-c", `exec 3<>"/dev/tcp/$1/22"`, "bash", to.String())
	return err == nil
}

// eventually reports whether f is true before ctx ends: a reach that
// should work is not given a time limit that a loaded machine could miss.
func eventually(ctx context.Context, f func() bool) bool {
	for !f() {
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// reachable reports whether from's host reaches addr:22 before ctx ends.
func reachable(t *testing.T, ctx context.Context, from remote.Remote, to netip.Addr) bool {
	t.Helper()
	return eventually(ctx, func() bool { return reaches(t, ctx, from, to) })
}

// TestCutHeal: Cut installs one rule per peer, read back by Cuts; with a
// cut on each side the hosts cannot reach each other while the control
// node reaches both; Heal lifts cuts one by one or all at once; a cut
// toward the control node, a kept address (the judge's), loopback or
// nothing is refused.
func TestCutHeal(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 3)
	h1, h2, h3 := lab.Hosts[0], lab.Hosts[1], lab.Hosts[2]
	ways := []struct {
		name string
		r    remote.Remote
	}{
		{"local-netns", remote.Local{Host: h1.Name, Netns: h1.Netns}},
		{"ssh-root", lab.Dial(t, 0, "root")},
	}
	if remotetest.SudoAvailable() {
		ways = append(ways, struct {
			name string
			r    remote.Remote
		}{"ssh-sudo", lab.Dial(t, 0, remotetest.Sudoer)})
	}
	s2 := lab.Dial(t, 1, "root")
	control := remote.Local{}
	doc := netip.MustParseAddr("2001:db8::7")
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			if !reachable(t, ctx, s2, h1.Addr) || !reachable(t, ctx, w.r, h2.Addr) {
				t.Fatal("host1 and host2 do not reach each other before the cut")
			}
			if err := remote.Cut(ctx, w.r, h2.Addr, h3.Addr, doc); err != nil {
				t.Fatal(err)
			}
			if err := remote.Cut(ctx, s2, h1.Addr); err != nil {
				t.Fatal(err)
			}
			cuts, err := remote.Cuts(ctx, w.r)
			if err != nil || !slices.Equal(cuts, []netip.Addr{h2.Addr, h3.Addr, doc}) {
				t.Fatalf("cuts on host1: %v (%v)", cuts, err)
			}
			// Again: still one rule per peer.
			if err := remote.Cut(ctx, w.r, h2.Addr); err != nil {
				t.Fatal(err)
			}
			if cuts, _ := remote.Cuts(ctx, w.r); len(cuts) != 3 {
				t.Errorf("after a second cut toward host2: %v", cuts)
			}
			if reaches(t, ctx, s2, h1.Addr) || reaches(t, ctx, w.r, h2.Addr) {
				t.Error("host1 and host2 reach each other through the cut")
			}
			if !reachable(t, ctx, control, h1.Addr) || !reachable(t, ctx, control, h2.Addr) {
				t.Error("the control node lost a host")
			}
			// One side's cut alone still stops a handshake: the answer
			// cannot come back.
			if err := remote.Heal(ctx, s2); err != nil {
				t.Fatal(err)
			}
			if reaches(t, ctx, s2, h1.Addr) {
				t.Error("host2 reaches host1 while host1 drops what it sends to host2")
			}
			if err := remote.Heal(ctx, w.r, h3.Addr); err != nil {
				t.Fatal(err)
			}
			if cuts, _ := remote.Cuts(ctx, w.r); !slices.Equal(cuts, []netip.Addr{h2.Addr, doc}) {
				t.Errorf("after healing host3 only: %v", cuts)
			}
			if err := remote.Heal(ctx, w.r); err != nil {
				t.Fatal(err)
			}
			if cuts, _ := remote.Cuts(ctx, w.r); len(cuts) != 0 {
				t.Errorf("after healing all: %v", cuts)
			}
			if !reachable(t, ctx, s2, h1.Addr) || !reachable(t, ctx, w.r, h2.Addr) {
				t.Error("host1 and host2 do not reach each other after the heal")
			}
			for _, bad := range [][]netip.Addr{
				nil,
				{netip.MustParseAddr("127.0.0.1")},
				{netip.MustParseAddr("::")},
				{{}},
			} {
				if err := remote.Cut(ctx, w.r, bad...); err == nil {
					t.Errorf("cut toward %v worked", bad)
				}
			}
		})
	}
	// Over SSH, the control node's address is refused; so is an address
	// said to be kept (the judge's), over SSH and here.
	if err := remote.Cut(ctx, s2, lab.Control); err == nil {
		t.Error("a cut toward the control node worked")
	} else {
		t.Log(err)
	}
	cfg := lab.SSHConfig(0, "root")
	cfg.Keep = []netip.Addr{h3.Addr}
	kept, err := remote.DialSSH(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	for _, r := range []remote.Remote{kept, remote.Local{Netns: h1.Netns, Keep: []netip.Addr{h3.Addr}}} {
		if err := remote.Cut(ctx, r, h2.Addr, h3.Addr); err == nil {
			t.Errorf("%s: a cut toward a kept address worked", r.Name())
		}
		if cuts, err := remote.Cuts(ctx, r); err != nil || len(cuts) != 0 {
			t.Errorf("%s: a refused cut left %v (%v)", r.Name(), cuts, err)
		}
		// One server's port on the kept host may be cut: the judge's
		// port there stays reachable.
		port := remote.Path{Addr: h3.Addr, DPort: 6379}
		if err := remote.CutPaths(ctx, r, port); err != nil {
			t.Errorf("%s: the cut of a port of a kept host: %v", r.Name(), err)
		}
		if err := remote.HealPaths(ctx, r, port); err != nil {
			t.Errorf("%s: %v", r.Name(), err)
		}
	}
}

// reachesPort reports whether from's host completes a TCP handshake with
// to:port within 2 s.
func reachesPort(t *testing.T, ctx context.Context, from remote.Remote, to netip.Addr, port int) bool {
	t.Helper()
	_, err := remote.Output(ctx, from, "timeout", "2", "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "bash", to.String(), strconv.Itoa(port))
	return err == nil
}

// TestCutPort: the cut of one server's port, on both sides (what host2
// sends to it, what it answers host2), separates it from host2 while
// host2 still reaches host1's other port (sshd) and the control node
// still reaches the server; the rules read back as paths, and healing the
// paths lifts them.
func TestCutPort(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 2)
	h1, h2 := lab.Hosts[0], lab.Hosts[1]
	s1, s2 := lab.Dial(t, 0, "root"), lab.Dial(t, 1, "root")
	const port = 6379
	srv, err := remote.Start(ctx, s1, remote.Daemon{
		Path: "redis-server", Args: []string{"--port", strconv.Itoa(port), "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/tmp"},
		Pidfile: "/tmp/cutport/redis.pid", Log: "/tmp/cutport/redis.log",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Kill(context.Background()) })
	if !eventually(ctx, func() bool { return reachesPort(t, ctx, s2, h1.Addr, port) }) {
		t.Fatal("host2 never reached the server")
	}
	toServer := remote.Path{Addr: h1.Addr, DPort: port}
	fromServer := remote.Path{Addr: h2.Addr, SPort: port}
	if err := remote.CutPaths(ctx, s2, toServer); err != nil {
		t.Fatal(err)
	}
	if err := remote.CutPaths(ctx, s1, fromServer); err != nil {
		t.Fatal(err)
	}
	if in, err := remote.CutsInForce(ctx, s1); err != nil || !slices.Equal(in, []remote.Path{fromServer}) {
		t.Errorf("cuts on host1: %v (%v)", in, err)
	}
	if addrs, err := remote.Cuts(ctx, s1); err != nil || len(addrs) != 0 {
		t.Errorf("whole-address cuts on host1: %v (%v)", addrs, err)
	}
	if reachesPort(t, ctx, s2, h1.Addr, port) {
		t.Error("host2 reached the server through the cut")
	}
	if !reachable(t, ctx, s2, h1.Addr) {
		t.Error("host2 lost host1's sshd: the cut took more than the server's port")
	}
	if !eventually(ctx, func() bool { return reachesPort(t, ctx, remote.Local{}, h1.Addr, port) }) {
		t.Error("the control node lost the server")
	}
	// Only host1's side: the server's answers to host2 are still dropped.
	if err := remote.HealPaths(ctx, s2, toServer); err != nil {
		t.Fatal(err)
	}
	if reachesPort(t, ctx, s2, h1.Addr, port) {
		t.Error("host2 reached the server whose answers to it are dropped")
	}
	// Healing host2's whole address lifts the cuts of its ports.
	if err := remote.Heal(ctx, s1, h2.Addr); err != nil {
		t.Fatal(err)
	}
	if in, _ := remote.CutsInForce(ctx, s1); len(in) != 0 {
		t.Errorf("after the heal: %v", in)
	}
	if !eventually(ctx, func() bool { return reachesPort(t, ctx, s2, h1.Addr, port) }) {
		t.Error("host2 does not reach the server after the heal")
	}
}
