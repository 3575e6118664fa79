package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
)

// A shared standalone server runs the conformance suite and the small
// tests, another the benchmarks; fault tests start their own ensembles.
// Both are started on first use and stopped when the tests end.
var (
	testServer  sharedServer
	benchServer sharedServer
)

type sharedServer struct {
	once  sync.Once
	dir   string
	env   *compose.Env
	addrs []string
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*sharedServer{&testServer, &benchServer} {
		if s.env != nil {
			if err := s.env.Close(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			os.RemoveAll(s.dir)
		}
	}
	os.Exit(code)
}

// addrsOf starts s with o on first use and returns its address.
func (s *sharedServer) addrsOf(tb testing.TB, o compose.ZooKeeperOptions) []string {
	tb.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "zookeeper-test-"); s.err != nil {
			return
		}
		if s.env, s.err = compose.New(s.dir); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var z *compose.Ensemble
		if z, s.err = s.env.ZooKeeper(ctx, 1, o); s.err == nil {
			s.addrs = z.Addrs()
		}
	})
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.addrs
}

// standalone returns the address of the tests' shared server, which runs
// like the fault tests' ensembles (see ensemble).
func standalone(tb testing.TB) []string {
	tb.Helper()
	return testServer.addrsOf(tb, testOptions(false))
}

// benchStandalone returns the address of the benchmarks' server: default
// tick (200 ms) and fsync on, as a server is normally run.
func benchStandalone(tb testing.TB) []string {
	tb.Helper()
	return benchServer.addrsOf(tb, compose.ZooKeeperOptions{})
}

// testOptions: a 100 ms tick lets sessions be as short as 200 ms; fsync is
// off, so that a loaded disk does not stall extensions and heartbeats past
// the short TTLs and sessions of the tests (a killed server still keeps
// what it wrote).
func testOptions(proxied bool) compose.ZooKeeperOptions {
	return compose.ZooKeeperOptions{TickTime: 100 * time.Millisecond, Proxied: proxied, NoFsync: true}
}

// ensemble starts n ZooKeeper servers for the test, with testOptions.
func ensemble(t testing.TB, n int, proxied bool) *compose.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := compose.ForTest(t).ZooKeeper(ctx, n, testOptions(proxied))
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// open opens a Locker on addrs through the registry, with params.
func open(t testing.TB, addrs []string, params map[string]string) *Locker {
	t.Helper()
	l, err := backends.Open("zookeeper", backends.Config{Addrs: addrs, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return l.(*Locker)
}

// openClosed is open with a cleanup that closes the Locker.
func openClosed(t testing.TB, addrs []string, params map[string]string) *Locker {
	t.Helper()
	l := open(t, addrs, params)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
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

// mustAcquire takes key within 30 s.
func mustAcquire(t testing.TB, l locker.Locker, key string, opts ...locker.Option) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lease
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
