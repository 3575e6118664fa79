package compose_test

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

// TestClientNetSplitView gives two clients namespaces of their own on
// the network of three Redis nodes and cuts them from overlapping sets —
// client A from node 0, client B from node 2 — the split view of issue
// 30: A still reaches nodes 1 and 2, B nodes 0 and 1, and this host every
// node. A cut dial times out (no refusal). A process started in A's
// namespace reaches the nodes A reaches, and this host at HostAddr (where
// a judge would listen). After the heal both reach every node.
func TestClientNetSplitView(t *testing.T) {
	composetest.NeedsPeerNetwork(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 3, Netns: true}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var clients [2]*compose.ClientNet
	for i := range clients {
		if clients[i], err = compose.NewClientNet(nodes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := clients[i].Close(); err != nil {
				t.Error(err)
			}
		})
	}
	a, b := clients[0], clients[1]
	if a.Addr() == b.Addr() {
		t.Fatalf("two clients at %s", a.Addr())
	}
	if err := a.Cut(nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.Cut(nodes[2]); err != nil {
		t.Fatal(err)
	}
	reach := func(c *compose.ClientNet, want [3]bool) {
		t.Helper()
		for i, n := range nodes {
			err := c.Reaches(ctx, n, 500*time.Millisecond)
			switch {
			case want[i] && err != nil:
				t.Errorf("client %s to node %d: %v; want reached", c.Addr(), i, err)
			case !want[i] && !isTimeout(err):
				t.Errorf("client %s to node %d: %v; want a timeout", c.Addr(), i, err)
			}
		}
	}
	reach(a, [3]bool{false, true, true})
	reach(b, [3]bool{true, true, false})
	for i, n := range nodes {
		if err := composetest.RedisClient(t, n.ServerAddr(), 300*time.Millisecond).Ping(ctx).Err(); err != nil {
			t.Errorf("this host to node %d during the clients' cuts: %v", i, err)
		}
	}

	// A process of A's namespace: a node A reaches, and this host.
	host, port, _ := net.SplitHostPort(nodes[1].ServerAddr())
	if out := runIn(t, a, "redis-cli", "-h", host, "-p", port, "PING"); !bytes.Contains(out, []byte("PONG")) {
		t.Errorf("redis-cli in client A's namespace to node 1: %q", out)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(a.HostAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("+PONG\r\n"))
	}()
	lport := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if out := runIn(t, a, "redis-cli", "-h", a.HostAddr().String(), "-p", lport, "PING"); !bytes.Contains(out, []byte("PONG")) {
		t.Errorf("redis-cli in client A's namespace to this host at %s: %q", a.HostAddr(), out)
	}

	if err := a.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	reach(a, [3]bool{true, true, true})
	reach(b, [3]bool{true, true, true})
	if err := a.Cut(nil); err == nil {
		t.Error("Cut(nil) = nil, want an error naming the bad node")
	}
}

// runIn runs a command in c's namespace and returns its output.
func runIn(t *testing.T, c *compose.ClientNet, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := c.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s in client %s's namespace: %v: %s", name, c.Addr(), err, out.Bytes())
	}
	return out.Bytes()
}
