package remote_test

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// pingFrom asks the Redis server at addr for a PONG from r's host, giving
// it 2 s: what a pause or a cut must prevent. (eventually wraps it where
// a PONG is due.)
func pingFrom(ctx context.Context, r remote.Remote, addr netip.Addr) bool {
	out, err := remote.Output(ctx, r, "timeout", "2", "redis-cli", "-h", addr.String(), "-p", "6379", "ping")
	return err == nil && strings.TrimSpace(string(out)) == "PONG"
}

// pingHere asks it from the control node (this process).
func pingHere(addr netip.Addr) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr.String(), "6379"), 2*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// processNames lists the commands of every process on r's host (its own
// PID namespace), to check what is left.
func processNames(t *testing.T, ctx context.Context, r remote.Remote) []string {
	t.Helper()
	out, err := remote.Output(ctx, r, "sh", "-c", `cat /proc/[0-9]*/comm 2>/dev/null; true`)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// TestRedisAcrossHosts is the seam end to end on simulated hosts: a real
// redis-server started on host1 over SSH with a pidfile answers host2;
// paused, it is stopped (state T) and answers nobody; a cut on each side
// separates host2 from it — new connections fail, an established one goes
// silent without a reset — while the control node still reaches it;
// healed, host2 reaches it again on both; killed, nothing of it is left on
// host1.
func TestRedisAcrossHosts(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	lab := remotetest.New(t, 2)
	h1, h2 := lab.Hosts[0], lab.Hosts[1]
	s1 := lab.Dial(t, 0, "root")
	s2 := lab.Dial(t, 1, "root")
	if remotetest.SudoAvailable() {
		s2 = lab.Dial(t, 1, remotetest.Sudoer) // host2 through sudo
	}

	redis, err := remote.Start(ctx, s1, remote.Daemon{
		Path:    "redis-server",
		Args:    []string{"--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/tmp/redis"},
		Pidfile: "/tmp/redis/redis.pid", Log: "/tmp/redis/redis.log",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Kill(context.Background()) })
	if !eventually(ctx, func() bool { return pingFrom(ctx, s2, h1.Addr) }) {
		var log strings.Builder
		_ = remote.Download(context.Background(), s1, "/tmp/redis/redis.log", &log)
		t.Fatalf("host2 never got a PONG from host1; redis log:\n%s", log.String())
	}

	start := time.Now()
	if err := redis.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("paused in %v", time.Since(start))
	wantState(t, ctx, redis, remote.Stopped)
	if pingFrom(ctx, s2, h1.Addr) || pingHere(h1.Addr) {
		t.Error("a paused server answered")
	}
	if err := redis.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, ctx, redis, remote.Running)
	if !eventually(ctx, func() bool { return pingFrom(ctx, s2, h1.Addr) }) {
		t.Fatal("no PONG after the resume")
	}

	// A client on host2 that keeps one connection and pings every 50 ms.
	loop, err := remote.Start(ctx, s2, remote.Daemon{
		Path:    "redis-cli",
		Args:    []string{"-h", h1.Addr.String(), "-i", "0.05", "-r", "1000000", "ping"},
		Pidfile: "/tmp/loop/loop.pid", Log: "/tmp/loop/pongs",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loop.Kill(context.Background()) })
	pongs := func() int {
		var b strings.Builder
		_ = remote.Download(ctx, s2, "/tmp/loop/pongs", &b)
		return strings.Count(b.String(), "PONG")
	}
	// PONGs reach its log as they come (redis-cli flushes each reply; a
	// 4 KiB buffer would hold the first for 40 s): a silence in the log is
	// a silence on the wire.
	for _, n := range []int{0, 1, 2} {
		if !eventually(ctx, func() bool { return pongs() > n }) {
			t.Fatalf("the looping client got %d PONGs", n)
		}
	}

	// host2 → host1 cut on both sides.
	if err := remote.Cut(ctx, s1, h2.Addr); err != nil {
		t.Fatal(err)
	}
	if err := remote.Cut(ctx, s2, h1.Addr); err != nil {
		t.Fatal(err)
	}
	if pingFrom(ctx, s2, h1.Addr) {
		t.Error("host2 reached host1 through the cut")
	}
	// The established connection goes silent, without a reset: the client
	// keeps running, and gets no PONG while the cut lasts.
	before := pongs()
	if pingFrom(ctx, s2, h1.Addr) {
		t.Error("host2 reached host1 through the cut")
	}
	if during := pongs() - before; during != 0 {
		t.Errorf("the established connection got %d PONGs through the cut", during)
	}
	wantState(t, ctx, loop, remote.Running)
	if !eventually(ctx, func() bool { return pingHere(h1.Addr) }) {
		t.Error("the control node lost host1's server during the cut")
	}
	if out, err := remote.Output(ctx, s1, "true"); err != nil {
		t.Errorf("the control node's SSH to host1 broke during the cut: %s %v", out, err)
	}
	if err := remote.Heal(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if err := remote.Heal(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if !eventually(ctx, func() bool { return pingFrom(ctx, s2, h1.Addr) }) {
		t.Error("host2 does not reach host1 after the heal")
	}
	// The same connection carries PONGs again (TCP retransmits).
	after := pongs()
	if !eventually(ctx, func() bool { return pongs() > after }) {
		t.Error("the established connection stayed silent after the heal")
	}
	if err := loop.Kill(ctx); err != nil {
		t.Fatal(err)
	}

	if err := redis.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	wantState(t, ctx, redis, remote.Gone)
	if pingFrom(ctx, s2, h1.Addr) || pingHere(h1.Addr) {
		t.Error("a killed server answered")
	}
	for _, name := range processNames(t, ctx, s1) {
		if name != "sshd" && name != "sh" && name != "cat" && name != "bash" {
			t.Errorf("left on host1 after the kill: %s", name)
		}
	}
}
