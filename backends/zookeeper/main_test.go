package zookeeper

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	zookeeperkind "github.com/lockbench/lockbench/kinds/zookeeper"
)

// A shared standalone server runs the conformance suite and the small
// tests, another the benchmarks; fault tests start their own ensembles.
var (
	testServer  = sharedServer(testOptions(false))
	benchServer = sharedServer(compose.Spec{}, zookeeperkind.Options{})
)

func TestMain(m *testing.M) { os.Exit(composetest.RunTests(m, testServer, benchServer)) }

// sharedServer is a standalone server run as s and o say, shared by the
// tests.
func sharedServer(s compose.Spec, o zookeeperkind.Options) *composetest.Shared[[]string] {
	s.Nodes = 1
	return composetest.NewShared(func(ctx context.Context, e *compose.Env) ([]string, error) {
		z, err := zookeeperkind.StartEnsemble(ctx, e, s, o)
		if err != nil {
			return nil, err
		}
		return z.Addrs(), nil
	})
}

// standalone returns the address of the tests' shared server, which runs
// like the fault tests' ensembles (see ensemble).
func standalone(tb testing.TB) []string {
	tb.Helper()
	return testServer.Get(tb)
}

// benchStandalone returns the address of the benchmarks' server: default
// tick (compose's 200 ms) and fsync on.
func benchStandalone(tb testing.TB) []string {
	tb.Helper()
	return benchServer.Get(tb)
}

// testOptions: a 100 ms tick lets sessions be as short as 200 ms; fsync is
// off, so that a loaded disk does not stall extensions and heartbeats past
// the short TTLs and sessions of the tests (a killed server still keeps
// what it wrote).
func testOptions(proxied bool) (compose.Spec, zookeeperkind.Options) {
	return compose.Spec{Proxied: proxied, Durability: compose.DurabilityFast}, zookeeperkind.Options{TickTime: 100 * time.Millisecond}
}

// ensemble starts n ZooKeeper servers for the test, with testOptions.
func ensemble(t testing.TB, n int, proxied bool) *zookeeperkind.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, o := testOptions(proxied)
	s.Nodes = n
	z, err := zookeeperkind.StartEnsemble(ctx, composetest.ForTest(t), s, o)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// open opens a Locker on addrs through the registry, with params; the
// caller closes it.
func open(t testing.TB, addrs []string, params map[string]string) *Locker {
	t.Helper()
	return backendstest.Open(t, "zookeeper", backends.Config{Addrs: addrs, Params: params}).(*Locker)
}

// openClosed is open with a Close when the test ends.
func openClosed(t testing.TB, addrs []string, params map[string]string) *Locker {
	t.Helper()
	return backendstest.OpenClosed(t, "zookeeper", backends.Config{Addrs: addrs, Params: params}).(*Locker)
}

// rawConn is a plain go-zookeeper connection for a test's own requests.
func rawConn(t testing.TB, addrs []string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		for range events {
		}
	})
	return c
}

// steal deletes every lock znode of key behind its holder's back.
func steal(t testing.TB, c *zk.Conn, root, key string) {
	t.Helper()
	parent := root + "/" + escape(key)
	// The thief's server may be a follower that has not applied the
	// holder's create yet (ZooKeeper reads are not linearizable; a busy
	// machine shows it): sync brings it up to the leader first.
	if _, err := c.Sync(parent); err != nil {
		t.Fatalf("steal %q: sync: %v", key, err)
	}
	children, _, err := c.Children(parent)
	if err != nil {
		t.Fatalf("steal %q: %v", key, err)
	}
	if len(children) == 0 {
		t.Fatalf("steal %q: nobody holds it", key)
	}
	for _, ch := range children {
		if err := c.Delete(parent+"/"+ch, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("steal %q: %v", key, err)
		}
	}
}

// mntr returns one counter of the server at addr, from its mntr report
// (zk_watch_count, zk_packets_received, ...).
func mntr(tb testing.TB, addr, name string) int {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Write([]byte("mntr")); err != nil {
		tb.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, name+"\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				tb.Fatalf("mntr: %q: %v", line, err)
			}
			return n
		}
	}
	tb.Fatalf("mntr at %s has no %s: %q", addr, name, out)
	return 0
}
