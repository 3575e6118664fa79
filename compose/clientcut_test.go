package compose_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
)

// TestCutClients cuts a Redis node in a network namespace off from this
// host and heals it: during the cut new connections time out (no
// refusal) and a request on an open connection goes unanswered (no reset,
// no close); after the heal the same connection delivers the reply to the
// request sent during the cut, and the server still lists that client —
// neither side saw a clean close. The proxy in front of the node is cut
// too.
func TestCutClients(t *testing.T) {
	composetest.NeedsPeerNetwork(t)
	ctx := context.Background()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 2, Netns: true, Proxied: true}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, other := nodes[0], nodes[1]
	conn, err := net.DialTimeout("tcp", n.ServerAddr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	request := func(cmd string, d time.Duration) (string, error) {
		if err := conn.SetDeadline(time.Now().Add(d)); err != nil {
			return "", err
		}
		if cmd != "" {
			if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
				return "", err
			}
		}
		return r.ReadString('\n')
	}
	if _, err := request("CLIENT SETNAME held-through-the-cut", time.Second); err != nil {
		t.Fatal(err)
	}

	if err := n.CutClients(); err != nil {
		t.Fatal(err)
	}
	if !n.ClientsCut() {
		t.Fatal("ClientsCut = false after CutClients")
	}
	if err := n.Unreachable(ctx, time.Second); err != nil {
		t.Fatalf("during the cut: %v", err)
	}
	if reply, err := request("PING", time.Second); !isTimeout(err) {
		t.Fatalf("PING on an open connection during the cut: %q, %v; want a timeout", reply, err)
	}
	if err := composetest.RedisClient(t, n.Addr(), 300*time.Millisecond).Ping(ctx).Err(); !isTimeout(err) {
		t.Fatalf("PING through the node's proxy during the cut: %v; want a timeout", err)
	}
	if err := composetest.RedisClient(t, other.ServerAddr(), 300*time.Millisecond).Ping(ctx).Err(); err != nil {
		t.Fatalf("the other node during the cut: %v", err)
	}

	if err := n.HealClients(); err != nil {
		t.Fatal(err)
	}
	if n.ClientsCut() {
		t.Fatal("ClientsCut = true after HealClients")
	}
	// The PING sent during the cut arrives at TCP's next retransmission.
	if reply, err := request("", 30*time.Second); err != nil || reply != "+PONG\r\n" {
		t.Fatalf("the reply to the PING sent during the cut, after the heal: %q, %v", reply, err)
	}
	list, err := composetest.RedisClient(t, n.ServerAddr(), 300*time.Millisecond).ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "name=held-through-the-cut") {
		t.Fatalf("the server lost the connection that lived through the cut: %s", list)
	}
	if err := n.Unreachable(ctx, time.Second); err == nil {
		t.Fatal("Unreachable after the heal: nil")
	}
}

// TestCutClientsNeedsANamespace checks that a node on this host's network
// cannot be cut, and says how.
func TestCutClientsNeedsANamespace(t *testing.T) {
	nodes, err := redis.StartServers(context.Background(), composetest.ForTest(t), compose.Spec{Nodes: 1}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].CutClients(); err == nil || !strings.Contains(err.Error(), "Netns") {
		t.Fatalf("CutClients of a node without Netns: %v; want an error naming Netns", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestCloseRemovesNetnsNodeFiles: an Env whose nodes run in network
// namespaces under the clock preload closes without error and leaves
// none of their files: Close removes them after the namespaces are gone
// (it once tried to enter them, and left PostgreSQL's data dir and every
// clock page behind).
func TestCloseRemovesNetnsNodeFiles(t *testing.T) {
	composetest.NeedsPeerNetwork(t)
	if err := compose.FakeClockAvailable(); err != nil {
		t.Skip(err)
	}
	composetest.StartsServers(t)
	e, err := compose.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := redis.StartServers(context.Background(), e, compose.Spec{Nodes: 1, Netns: true, FakeClock: true}, redis.Options{})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	var left []string
	for _, n := range nodes {
		left = append(left, n.Dir+".clock")
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after Close (%v)", p, err)
		}
	}
}
