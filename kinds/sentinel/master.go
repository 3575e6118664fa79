package sentinel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
)

// SentinelAddrs returns the addresses clients should ask for the master
// (the sentinels' proxies when the set is Proxied).
func (s *Set) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the Redis nodes of the set: the initial master, then the
// replicas.
func (s *Set) Nodes() []*compose.Node {
	return append([]*compose.Node{s.Master}, s.Replicas...)
}

// Node returns the Redis node or sentinel whose server or client address
// is addr, such as an address CurrentMaster returned, or nil.
func (s *Set) Node(addr string) *compose.Node {
	for _, n := range append(s.Nodes(), s.Sentinels...) {
		if n.ServerAddr() == addr || n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Dial connects to addr, or to the proxy in front of the node at addr when
// the set is Proxied. Sentinels report the servers' own addresses; use
// Dial as go-redis's Options.Dialer (or FailoverOptions.Dialer) to reach
// them through their proxies, so that node faults apply to the client.
func (s *Set) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if n := s.Node(addr); n != nil {
		addr = n.Addr()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Leader returns the node the sentinels currently report as master: the
// set's leader, as a ZooKeeper ensemble's and an etcd cluster's Leader
// return theirs.
func (s *Set) Leader(ctx context.Context) (*compose.Node, error) {
	addr, err := s.CurrentMaster(ctx)
	if err != nil {
		return nil, err
	}
	if n := s.Node(addr); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("sentinel: the master %s is none of the set's nodes", addr)
}

// CurrentMaster asks the sentinels, in order, for the master's address
// (the server's own) and returns the first answer.
func (s *Set) CurrentMaster(ctx context.Context) (string, error) {
	return s.currentMaster(ctx, "")
}

// currentMaster is CurrentMaster without asking the sentinel named skip.
// It dials addresses only, so a sentinel's prepare may call it.
func (s *Set) currentMaster(ctx context.Context, skip string) (string, error) {
	var errs []error
	for _, sn := range s.Sentinels {
		if sn.Name == skip {
			continue
		}
		c := goredis.NewSentinelClient(probeOptions(sn.ServerAddr()))
		m, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sn.Name, err))
			continue
		}
		return net.JoinHostPort(m[0], m[1]), nil
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("sentinel: no sentinel to ask for master %s", s.MasterName)
	}
	return "", fmt.Errorf("sentinel: master %s: %w", s.MasterName, errors.Join(errs...))
}

// Failover makes the sentinels promote a replica now (SENTINEL FAILOVER,
// which needs no agreement), and waits until they report a new master
// that answers ROLE as a master. It returns the new master's address.
// ctx bounds the wait; without a deadline it is one minute.
func (s *Set) Failover(ctx context.Context) (string, error) {
	ctx, cancel := compose.WithDefaultTimeout(ctx, time.Minute)
	defer cancel()
	old, err := s.CurrentMaster(ctx)
	if err != nil {
		return "", err
	}
	// A sentinel refuses (NOGOODSLAVE, INPROG) until it sees a promotable
	// replica and no failover is running: try them in turn until one
	// accepts.
	err = compose.Poll(ctx, time.Minute, func(ctx context.Context) error {
		var errs []error
		for _, sn := range s.Sentinels {
			c := goredis.NewSentinelClient(probeOptions(sn.ServerAddr()))
			err := c.Failover(ctx, s.MasterName).Err()
			c.Close()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", sn.Name, err))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return "", fmt.Errorf("sentinel: SENTINEL FAILOVER %s: %w", s.MasterName, err)
	}
	return s.AwaitNewMaster(ctx, old)
}

// SetDownAfter makes every sentinel consider the master down once it
// has not answered for d (SENTINEL SET down-after-milliseconds): the
// wait an automatic failover begins with. It asks them all, and returns
// the errors of those that refused, each named.
func (s *Set) SetDownAfter(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("sentinel: down-after %v: want at least 1ms", d)
	}
	var errs []error
	for _, sn := range s.Sentinels {
		c := goredis.NewSentinelClient(probeOptions(sn.ServerAddr()))
		err := c.Set(ctx, s.MasterName, "down-after-milliseconds", strconv.FormatInt(d.Milliseconds(), 10)).Err()
		c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sn.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sentinel: SENTINEL SET %s down-after-milliseconds %d: %w", s.MasterName, d.Milliseconds(), err)
	}
	return nil
}

// AwaitNewMaster waits until every sentinel that answers (a majority at
// least) reports the same master other than old, and that master answers
// ROLE as a master; it returns its address. Use it after killing or
// partitioning the master to wait for the automatic failover. ctx bounds
// the wait; without a deadline it is one minute.
func (s *Set) AwaitNewMaster(ctx context.Context, old string) (string, error) {
	ctx, cancel := compose.WithDefaultTimeout(ctx, time.Minute)
	defer cancel()
	dl, _ := ctx.Deadline()
	var master string
	err := compose.Poll(ctx, time.Until(dl), func(ctx context.Context) error {
		agreed, answers := "", 0
		for _, sn := range s.Sentinels {
			c := goredis.NewSentinelClient(probeOptions(sn.ServerAddr()))
			m, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
			c.Close()
			if err != nil {
				continue // down or paused: its view does not count
			}
			got := net.JoinHostPort(m[0], m[1])
			if got == old {
				return fmt.Errorf("%s still reports master %s", sn.Name, old)
			}
			if agreed != "" && got != agreed {
				return fmt.Errorf("sentinels disagree: %s and %s", agreed, got)
			}
			agreed = got
			answers++
		}
		if answers < s.quorum {
			return fmt.Errorf("%d sentinels answer, want %d", answers, s.quorum)
		}
		c := goredis.NewClient(probeOptions(agreed))
		role, err := c.Do(ctx, "ROLE").Slice()
		c.Close()
		if err != nil {
			return fmt.Errorf("ROLE at %s: %w", agreed, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s is not a master yet (ROLE %v)", agreed, role)
		}
		master = agreed
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("sentinel: no new master for %s after %s: %w", s.MasterName, old, err)
	}
	return master, nil
}
