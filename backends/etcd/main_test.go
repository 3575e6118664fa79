package etcd

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	etcdkind "github.com/lockbench/lockbench/kinds/etcd"
)

// shared is the one-member cluster the conformance suite, the small tests
// and the benchmarks share, with fsync on, as a server is run; fault tests
// start their own clusters.
var shared = composetest.NewShared(func(ctx context.Context, e *compose.Env) ([]string, error) {
	c, err := etcdkind.StartCluster(ctx, e, compose.Spec{Nodes: 1}, etcdkind.Options{})
	if err != nil {
		return nil, err
	}
	return c.Endpoints(), nil
})

func TestMain(m *testing.M) { os.Exit(composetest.RunTests(m, shared)) }

// single returns the endpoints of the shared one-member cluster.
func single(tb testing.TB) []string {
	tb.Helper()
	return shared.Get(tb)
}

// cluster starts n members for the test. fsync is off, so that a loaded
// disk does not stall elections (a killed member still keeps what it
// wrote).
func cluster(t testing.TB, n int, proxied bool) *etcdkind.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := compose.Spec{Nodes: n, Proxied: proxied, Durability: compose.DurabilityFast}
	c, err := etcdkind.StartCluster(ctx, composetest.ForTest(t), s, etcdkind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open opens a Locker on endpoints through the registry, with params; the
// caller closes it.
func open(t testing.TB, endpoints []string, params map[string]string) *Locker {
	t.Helper()
	return backendstest.Open(t, "etcd", backends.Config{Addrs: endpoints, Params: params}).(*Locker)
}

// openClosed is open with a Close when the test ends.
func openClosed(t testing.TB, endpoints []string, params map[string]string) *Locker {
	t.Helper()
	return backendstest.OpenClosed(t, "etcd", backends.Config{Addrs: endpoints, Params: params}).(*Locker)
}

// rawClient is a plain etcd client for a test's own requests, closed when
// the test ends.
func rawClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// holderKey returns the etcd key and lease of the holder of a lock, found
// under its prefix (Locker.Prefix).
func holderKey(t testing.TB, c *clientv3.Client, prefix string) (string, clientv3.LeaseID) {
	t.Helper()
	return holderKeyAt(t, c, prefix, 0)
}

// holderKeyAt returns the etcd key and lease at place i of a lock's queue
// (0 is the holder).
func holderKeyAt(t testing.TB, c *clientv3.Client, prefix string, i int) (string, clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatalf("read the queue under %s: %v", prefix, err)
	}
	if len(resp.Kvs) <= i {
		t.Fatalf("the queue under %s has %d keys, want more than %d", prefix, len(resp.Kvs), i)
	}
	return string(resp.Kvs[i].Key), clientv3.LeaseID(resp.Kvs[i].Lease)
}

// queueLen counts the keys under prefix: a lock's queue, holder included.
func queueLen(ctx context.Context, c *clientv3.Client, prefix string) (int64, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// steal deletes every key of a lock's queue behind their owners' backs.
func steal(t testing.TB, c *clientv3.Client, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("steal %s: %v", prefix, err)
	}
	if resp.Deleted == 0 {
		t.Fatalf("steal %s: nobody holds it", prefix)
	}
}
