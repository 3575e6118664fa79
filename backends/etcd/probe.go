package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockbench/lockbench/backends"
)

// Probe reads what the etcd member at cfg.Addrs[0] holds for the keys
// whose names contain substr: the queue entries under the lock prefix
// (the prefix param), each attached to a lease. The range is serializable,
// answered by that member from its own copy without asking the leader, so
// a member that lost its data shows it. The remaining life of the leases
// (TimeToLive) comes from the leader, which counts leases down.
func Probe(ctx context.Context, cfg backends.Config, substr string) (backends.Stored, error) {
	if err := cfg.NeedAddrs(1); err != nil {
		return backends.Stored{}, err
	}
	prefix := cfg.String("prefix", DefaultPrefix)
	endpoints, err := endpointURLs(cfg.Addrs[:1], cfg.TLS != nil)
	if err != nil {
		return backends.Stored{}, err
	}
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Username: cfg.Username,
		Password: cfg.Password, Logger: zap.NewNop()}
	if cfg.TLS != nil {
		cc.TLS = cfg.TLS.Clone()
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: %w", cfg.Addrs[0], err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: range %s: %w", cfg.Addrs[0], prefix, err)
	}
	var s backends.Stored
	want := escape(substr)
	leases := map[clientv3.LeaseID]bool{}
	for _, kv := range resp.Kvs {
		if !strings.Contains(string(kv.Key), want) {
			continue
		}
		s.Add(string(kv.Key), fmt.Sprintf("rev %d, lease %x", kv.CreateRevision, kv.Lease))
		if kv.Lease != 0 {
			s.Expiring++
			leases[clientv3.LeaseID(kv.Lease)] = true
		}
	}
	first := true
	for id := range leases {
		ttl, err := cli.TimeToLive(ctx, id)
		if err != nil {
			return backends.Stored{}, fmt.Errorf("probe %s: lease %x: %w", cfg.Addrs[0], id, err)
		}
		if d := time.Duration(ttl.TTL) * time.Second; ttl.TTL >= 0 && (first || d < s.TTL) {
			s.TTL, first = d, false
		}
	}
	return s, nil
}
