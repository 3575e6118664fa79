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

// shared is the standalone server the conformance suite, the small tests
// and the benchmarks share; fault tests start their own ensembles.
var shared struct {
	once  sync.Once
	dir   string
	env   *compose.Env
	addrs []string
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// standalone returns the address of the shared server, starting it on
// first use: default tick (200 ms) and fsync on, as a server is run.
func standalone(t testing.TB) []string {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "zookeeper-test-"); shared.err != nil {
			return
		}
		if shared.env, shared.err = compose.New(shared.dir); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var z *compose.Ensemble
		if z, shared.err = shared.env.ZooKeeper(ctx, 1, compose.ZooKeeperOptions{}); shared.err == nil {
			shared.addrs = z.Addrs()
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.addrs
}

// ensemble starts n ZooKeeper servers for the test. A 100 ms tick lets
// sessions be as short as 200 ms; fsync is off, so that a loaded disk does
// not stall a short session (a killed server still keeps what it wrote).
func ensemble(t testing.TB, n int, proxied bool) *compose.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := compose.ForTest(t).ZooKeeper(ctx, n, compose.ZooKeeperOptions{
		TickTime: 100 * time.Millisecond, Proxied: proxied, NoFsync: true,
	})
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
