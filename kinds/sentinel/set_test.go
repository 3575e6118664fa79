package sentinel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/sentinel"
)

func startSentinel(t *testing.T, spec compose.Spec, o sentinel.Options) *sentinel.Set {
	t.Helper()
	s, err := sentinel.StartSet(context.Background(), composetest.ForTest(t), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sentinels) != 3 || len(s.Replicas) != max(spec.Nodes, 2)-1 || s.MasterName == "" {
		t.Fatalf("set has %d sentinels, %d replicas, master name %q", len(s.Sentinels), len(s.Replicas), s.MasterName)
	}
	return s
}

// waitReplicated waits until n replicas have acknowledged every write the
// master had received, and fails if they do not within 3 s.
func waitReplicated(t *testing.T, master *redis.Client, n int) {
	t.Helper()
	got, err := master.Wait(context.Background(), n, 3*time.Second).Result()
	if err != nil || got < int64(n) {
		t.Fatalf("WAIT %d = %d, %v", n, got, err)
	}
}

func TestSentinelReplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startSentinel(t, compose.Spec{Nodes: 3}, sentinel.Options{ProxiedReplication: true})
	if got, err := s.CurrentMaster(ctx); err != nil || got != s.Master.ServerAddr() {
		t.Fatalf("CurrentMaster = %q, %v; want %s", got, err, s.Master.ServerAddr())
	}
	m := composetest.RedisClient(t, s.Master.Addr(), 3*time.Second)
	if err := m.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, m, 2)
	for _, r := range s.Replicas {
		if v, err := composetest.RedisClient(t, r.Addr(), 3*time.Second).Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("GET k on %s = %q, %v; want v", r.Name, v, err)
		}
	}
	if s.Node(s.Replicas[1].ServerAddr()) != s.Replicas[1] || s.Node("127.0.0.1:1") != nil {
		t.Fatal("Node does not map addresses to nodes")
	}

	// A partitioned link holds one replica back; the other gets the
	// writes. Healing the link closes the connection it cut, so the
	// replica reconnects and resumes from the last write it applied.
	if err := s.ReplicationLinks[0].Partition(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := m.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitReplicated(t, m, 1)
	r0, r1 := composetest.RedisClient(t, s.Replicas[0].Addr(), 3*time.Second), composetest.RedisClient(t, s.Replicas[1].Addr(), 3*time.Second)
	if n, err := r1.Exists(ctx, "a", "b").Result(); err != nil || n != 2 {
		t.Fatalf("the replica with a healthy link has %d of 2 keys (%v)", n, err)
	}
	if n, err := r0.Exists(ctx, "a", "b").Result(); err != nil || n != 0 {
		t.Fatalf("the replica behind a partition has %d of 2 keys (%v)", n, err)
	}
	if err := s.ReplicationLinks[0].Heal(); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, "c", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, m, 2)
	if n, err := r0.Exists(ctx, "a", "b", "c").Result(); err != nil || n != 3 {
		t.Fatalf("after Heal the replica has %d of 3 keys (%v)", n, err)
	}
}

// TestSentinelFailover also runs the set behind proxies, with a go-redis
// FailoverClient that follows the failover and dials through s.Dial.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startSentinel(t, compose.Spec{Proxied: true}, sentinel.Options{})
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs(), Dialer: s.Dial,
		MaxRetries: 3, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
	})
	// Few retries: go-redis's Close waits for a sentinel subscription
	// that is reconnecting through all its retries (13 s with 20).
	t.Cleanup(func() { fc.Close() })
	if err := fc.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	old := s.Master.ServerAddr()
	got, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got == old || got != s.Replicas[0].ServerAddr() {
		t.Fatalf("Failover promoted %s, want the replica %s", got, s.Replicas[0].ServerAddr())
	}
	if cur, err := s.CurrentMaster(ctx); err != nil || cur != got {
		t.Fatalf("CurrentMaster after Failover = %q, %v; want %s", cur, err, got)
	}
	if err := composetest.RedisClient(t, s.Replicas[0].Addr(), 3*time.Second).Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET on the new master: %v", err)
	}
	// A sentinel restarted with its (rewritten) config, or without it,
	// monitors the new master.
	for i, keep := range []bool{true, false} {
		sn := s.Sentinels[i]
		if err := sn.Restart(ctx, keep); err != nil {
			t.Fatal(err)
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
		m, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
		sc.Close()
		if err != nil || len(m) != 2 || m[0]+":"+m[1] != got {
			t.Fatalf("%s restarted (keepData %v) reports master %v, %v; want %s", sn.Name, keep, m, err, got)
		}
	}
	// The client finds the new master (after a READONLY error from the
	// demoted one at most) and reaches it through its proxy: partitioning
	// that proxy cuts the client off.
	if v, err := fc.Get(ctx, "k").Result(); err != nil || v != "v2" {
		t.Fatalf("GET k through the failover client = %q, %v; want v2", v, err)
	}
	if err := s.Replicas[0].Partition(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := fc.Get(short, "k").Err(); err == nil {
		t.Fatal("GET answered across a partition: the client bypassed the proxy")
	}
}

func TestSentinelKillMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startSentinel(t, compose.Spec{}, sentinel.Options{})
	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := s.AwaitNewMaster(ctx, s.Master.ServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("automatic failover took %v", time.Since(start))
	if n := s.Node(got); n != s.Replicas[0] {
		t.Fatalf("the sentinels promoted %s, want the replica %s", got, s.Replicas[0].ServerAddr())
	}
	// Sentinel rewrote the promoted node's config: restarted with its
	// data, it would stay a master.
	conf, err := os.ReadFile(filepath.Join(s.Replicas[0].Dir, "redis.conf"))
	if err != nil || strings.Contains(string(conf), "\nreplicaof") {
		t.Fatalf("the promoted replica's redis.conf (%v) still names a master:\n%s", err, conf)
	}
	// The old master, reinstalled without its data, joins the new one.
	if err := s.Master.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	old := composetest.RedisClient(t, s.Master.Addr(), 3*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // probe pacing, not synchronisation
	defer tick.Stop()
	for ; ; <-tick.C {
		info, err := old.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
			strings.Contains(info, "master_port:"+strings.Split(got, ":")[1]+"\r") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted old master is not a replica of %s: %v\n%s", got, err, info)
		}
	}
}

// TestSentinelLostWrite is the Redis lost-write failover: a key written to
// the master while replication is held back is not on the replica, and
// when the master dies the sentinels promote the replica without it.
func TestSentinelLostWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startSentinel(t, compose.Spec{}, sentinel.Options{ProxiedReplication: true})
	link, ok := s.ReplicationLinks[0].(*compose.Proxy)
	if !ok || link.Upstream != s.Master.ServerAddr() {
		t.Fatalf("replication link = %+v, want a proxy to the master", link)
	}
	m := composetest.RedisClient(t, s.Master.Addr(), 3*time.Second)
	r := composetest.RedisClient(t, s.Replicas[0].Addr(), 3*time.Second)
	if err := m.Set(ctx, "before", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, m, 1)

	if err := link.Partition(); err != nil {
		t.Fatal(err)
	}
	if err := m.Set(ctx, "lock", "client-1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Wait(ctx, 1, 300*time.Millisecond).Result(); err != nil || got != 0 {
		t.Fatalf("WAIT across a partitioned link = %d, %v; want 0 replicas", got, err)
	}
	if err := r.Get(ctx, "lock").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET lock on the replica = %v; want redis.Nil (not replicated)", err)
	}

	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	got, err := s.AwaitNewMaster(ctx, s.Master.ServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	if got != s.Replicas[0].ServerAddr() {
		t.Fatalf("promoted %s, want %s", got, s.Replicas[0].ServerAddr())
	}
	if v, err := r.Get(ctx, "before").Result(); err != nil || v != "v" {
		t.Fatalf("a replicated key was lost: %q, %v", v, err)
	}
	if err := r.Get(ctx, "lock").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET lock on the promoted replica = %v; want the write lost", err)
	}
	// A second client now takes the lock the first one holds.
	if ok, err := r.SetNX(ctx, "lock", "client-2", 0).Result(); err != nil || !ok {
		t.Fatalf("SETNX lock on the new master = %v, %v; want true", ok, err)
	}
}

// TestSentinelDownAfter: SetDownAfter reaches every sentinel, and the
// automatic failover then waits for it (a failover's first wait, which
// the failover fault's size sets); a wait under a millisecond is refused.
func TestSentinelDownAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startSentinel(t, compose.Spec{}, sentinel.Options{})
	if err := s.SetDownAfter(ctx, 0); err == nil || !strings.Contains(err.Error(), "down-after 0s") {
		t.Errorf("SetDownAfter(0) = %v, want an error naming the value", err)
	}
	const wait = 3 * time.Second
	if err := s.SetDownAfter(ctx, wait); err != nil {
		t.Fatal(err)
	}
	for _, addr := range s.SentinelAddrs() {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr})
		m, err := c.Master(ctx, s.MasterName).Result()
		c.Close()
		if err != nil || m["down-after-milliseconds"] != "3000" {
			t.Errorf("sentinel %s: down-after-milliseconds %q (%v), want 3000", addr, m["down-after-milliseconds"], err)
		}
	}
	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.AwaitNewMaster(ctx, s.Master.ServerAddr()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("automatic failover after down-after %v took %v", wait, took)
	if took < wait {
		t.Errorf("the failover took %v, before the sentinels' down-after of %v", took, wait)
	}
}
