// Package etcdtest is what tests need of the etcd members kinds/etcd
// starts beyond the package itself: a client, which compose's partition
// tests and the kind's own tests share.
package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Client is a client of the members at endpoints that gives up on a dial
// within a second and logs nothing, closed when tb ends.
func Client(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
