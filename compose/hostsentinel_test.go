package compose_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// placedSentinel is TestPlaced's Sentinel set: its master on the first
// host, its replica on the second, a sentinel on each of the three (the
// third is the clients' host), every Redis node on the clock preload.
// Replication held back by rules on the two hosts (proven there) loses the
// write a failover then drops; the sentinels, reached at their hosts'
// addresses, report the promoted replica at its own; a cut of the new
// master's clients leaves the sentinels, on the servers' side, seeing it;
// the old master, restarted without its data, follows the new one.
func placedSentinel(t *testing.T, ctx context.Context, env *compose.Env, lab *remotetest.Lab, hosts []*remote.SSH, clients []compose.Peer) {
	var on, sentinelsOn []compose.Placement
	for i := range hosts {
		p := compose.Placement{Host: hosts[i], Addr: lab.Hosts[i].Addr, Clients: clients}
		if i < 2 {
			p.Port, p.Dir = 6380, "/tmp/lockbench/sentinel-redis"
			on = append(on, p)
		}
		p.Port, p.Dir = 26379, "/tmp/lockbench/sentinel"
		sentinelsOn = append(sentinelsOn, p)
	}
	s, err := sentinel.StartSet(ctx, env, compose.Spec{FakeClock: true, On: on}, sentinel.Options{SentinelsOn: sentinelsOn})
	if err != nil {
		t.Fatal(err)
	}
	master, replica := s.Master, s.Replicas[0]
	if want := lab.Hosts[0].Addr.String() + ":6380"; master.ServerAddr() != want || master.Host().Name() != lab.Hosts[0].Name {
		t.Fatalf("the master runs on %s at %s, want %s at %s", master.Host().Name(), master.ServerAddr(), lab.Hosts[0].Name, want)
	}
	if got, err := s.CurrentMaster(ctx); err != nil || got != master.ServerAddr() {
		t.Fatalf("the sentinels report master %q (%v), want %s", got, err, master.ServerAddr())
	}
	if len(s.ReplicationLinks) != 1 {
		t.Fatalf("%d replication links, want 1", len(s.ReplicationLinks))
	}
	m := composetest.RedisClient(t, master.ServerAddr(), 3*time.Second)
	if err := m.Set(ctx, "before", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Wait(ctx, 1, 3*time.Second).Result(); err != nil || got < 1 { // the replica has the write
		t.Fatalf("WAIT 1 = %d, %v", got, err)
	}

	link := s.ReplicationLinks[0]
	if err := link.Partition(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts[:2] {
		if cuts, err := remote.CutsInForce(ctx, h); err != nil || len(cuts) == 0 {
			t.Errorf("no cut on %s while replication is held back: %v (%v)", h.Name(), cuts, err)
		}
	}
	if err := m.Set(ctx, "lock", "client-1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Wait(ctx, 1, 300*time.Millisecond).Result(); err != nil || got != 0 {
		t.Fatalf("WAIT across a held-back link = %d, %v; want 0 replicas", got, err)
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted, err := s.AwaitNewMaster(ctx, master.ServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	if promoted != replica.ServerAddr() {
		t.Fatalf("the sentinels promoted %s, want the replica at %s", promoted, replica.ServerAddr())
	}
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	r := composetest.RedisClient(t, promoted, 3*time.Second)
	if n, err := r.Exists(ctx, "before", "lock").Result(); err != nil || n != 1 {
		t.Errorf("the promoted replica has %d of the keys written before and during the held-back replication (%v): want 1, the lock lost", n, err)
	}

	if err := master.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	old := composetest.RedisClient(t, master.ServerAddr(), 3*time.Second)
	for {
		role, err := old.Do(ctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "slave" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the old master, restarted without its data, never followed the new one: ROLE %v, %v", role, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the node's own word
	}

	// A cut of the new master's clients: the sentinel on the clients'
	// host loses it with them, the two beside the Redis nodes, on the
	// servers' side, keep it (so no quorum marks it down).
	if err := replica.CutClients(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Unreachable(ctx, 2*time.Second); err != nil {
		t.Errorf("after the cut: %v", err)
	}
	flags := func(sn *compose.Node) string {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.ServerAddr(), MaxRetries: -1, DialTimeout: 3 * time.Second})
		defer c.Close()
		m, err := c.Master(ctx, s.MasterName).Result()
		if err != nil {
			t.Fatalf("%s: %v", sn.Name, err)
		}
		return m["flags"]
	}
	for !strings.Contains(flags(s.Sentinels[2]), "s_down") {
		if ctx.Err() != nil {
			t.Fatalf("the sentinel on the clients' host never lost the cut master")
		}
		time.Sleep(50 * time.Millisecond) // polling the sentinel's own word
	}
	for _, sn := range s.Sentinels[:2] {
		if f := flags(sn); strings.Contains(f, "down") {
			t.Errorf("%s, on the servers' side of the cut, flags the master %q", sn.Name, f)
		}
	}
	if got, err := s.CurrentMaster(ctx); err != nil || got != promoted {
		t.Errorf("the sentinels report master %q (%v) during a cut of its clients, want %s still", got, err, promoted)
	}
	if err := replica.HealClients(); err != nil {
		t.Fatal(err)
	}
}
