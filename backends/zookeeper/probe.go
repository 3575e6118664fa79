package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/backends"
)

// Probe reads what the ZooKeeper server at cfg.Addrs[0] holds for the
// keys whose names contain substr: their persistent parents under the
// lock root (the root param) and the lock znodes in their queues (each
// ephemeral, alive with its session). Reads are answered by that server
// from its own copy, so a server that lost its data shows it; a server
// that serves no clients (it lost its quorum) is an error. Nothing
// expires by a clock: Expiring is 0.
func Probe(ctx context.Context, cfg backends.Config, substr string) (backends.Stored, error) {
	if err := cfg.NeedAddrs(1); err != nil {
		return backends.Stored{}, err
	}
	root := cfg.String("root", DefaultRoot)
	d := &dialer{tls: cfg.TLS, conns: map[*sniffConn]struct{}{}, onConnect: func(int64, time.Duration, time.Time) {}}
	defer d.close()
	c, events, err := zk.Connect(cfg.Addrs[:1], 4*time.Second, zk.WithDialer(d.Dial), zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: %w", cfg.Addrs[0], err)
	}
	defer c.Close()
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-ctx.Done():
			return backends.Stored{}, fmt.Errorf("probe %s: no session: %w", cfg.Addrs[0], ctx.Err())
		}
	}
	if cfg.Username != "" {
		if err := c.AddAuth("digest", []byte(cfg.Username+":"+cfg.Password)); err != nil {
			return backends.Stored{}, fmt.Errorf("probe %s: auth: %w", cfg.Addrs[0], err)
		}
	}
	parents, _, err := c.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Stored{}, nil
	}
	if err != nil {
		return backends.Stored{}, fmt.Errorf("probe %s: children of %s: %w", cfg.Addrs[0], root, err)
	}
	var s backends.Stored
	want := escape(substr)
	for _, p := range parents {
		if !strings.Contains(p, want) {
			continue
		}
		kids, _, err := c.Children(root + "/" + p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return backends.Stored{}, fmt.Errorf("probe %s: children of %s/%s: %w", cfg.Addrs[0], root, p, err)
		}
		// Sequential names are never reused: a znode's name is its
		// identity. The parent's cversion counts the children ever made.
		s.Add(p, "")
		for _, k := range kids {
			s.Add(p+"/"+k, "")
		}
	}
	return s, nil
}
