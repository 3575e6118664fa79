package compose

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions configures standalone Redis nodes.
type RedisOptions struct {
	// Durability is when each node fsyncs (see Durability): without
	// persistence (fast, the zero value's), appendfsync everysec
	// (periodic) or always (durable).
	Durability Durability
	// LazyFS puts each node's dir on a lazy filesystem, so that
	// Node.PowerLoss drops what the node did not fsync. It needs root and
	// /dev/fuse (LazyFSAvailable).
	LazyFS bool
	// FakeClock runs the server under compose's clock preload, so that
	// Node.JumpClock and Node.SetClockRate move its wall clock (Redis expires keys by it). It
	// needs a C compiler (Programs.CC).
	FakeClock bool
	// Proxied starts each node behind a Proxy, so that it can be
	// partitioned from, or slowed for, its clients.
	Proxied bool
	// Netns starts each node in a network namespace of its own, at an
	// address of its own (port 6379), reachable from this host by routes,
	// so that Node.CutClients cuts its clients off for real. It needs root
	// and the ip command: see PeerNetworkAvailable.
	Netns bool
	// Config holds extra redis.conf directives, each as a name and its
	// arguments, e.g. {"maxmemory", "100mb"}.
	Config [][]string
	// On, when set, places the nodes on hosts, one Placement each (see
	// Placement): n must be len(On). Proxied, Netns and LazyFS apply to
	// nodes on this machine only.
	On []Placement
}

// Redis starts n standalone redis-server nodes (independent masters, as
// Redlock wants them) and waits until each answers PING.
func (e *Env) Redis(ctx context.Context, n int, o RedisOptions) ([]*Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("compose: %d Redis nodes: need at least 1", n)
	}
	d, err := durability(o.Durability, DurabilityFast)
	if err != nil {
		return nil, err
	}
	if o.On != nil {
		return e.redisOn(ctx, n, o, d)
	}
	bin, err := exec.LookPath(e.Programs.RedisServer)
	if err != nil {
		return nil, fmt.Errorf("compose: %w (install Debian's redis-server: make deps)", err)
	}
	l, err := e.layOut(n, o.Netns, 6379)
	if err != nil {
		return nil, err
	}
	nodes := make([]*Node, n)
	for i, name := range e.newNames("redis", n) {
		host, port := l.hosts[i], l.ports[i][0]
		args := redisArgs(host, port, filepath.Join(e.Dir, name), d)
		for _, c := range o.Config {
			args = append(args, append([]string{"--" + c[0]}, c[1:]...)...)
		}
		s := spec{
			name: name, kind: kindRedis, port: port, bin: bin, args: args,
			ready:  redisReady(hostAddr(host, port)),
			clock:  redisTime,
			lazyFS: o.LazyFS, fakeClock: o.FakeClock,
		}
		l.place(&s, i)
		node, err := e.startNode(ctx, s, o.Proxied)
		if err != nil {
			return nil, err
		}
		nodes[i] = node
	}
	return nodes, nil
}

// redisOn starts Redis nodes placed on hosts.
func (e *Env) redisOn(ctx context.Context, n int, o RedisOptions, d Durability) ([]*Node, error) {
	if len(o.On) != n {
		return nil, fmt.Errorf("compose: %d Redis nodes on %d placements: want one each", n, len(o.On))
	}
	if o.Proxied || o.Netns {
		return nil, errors.New("compose: Redis nodes placed on hosts: Proxied and Netns apply to nodes on this machine only")
	}
	nodes := make([]*Node, n)
	for i, name := range e.newNames("redis", n) {
		p := &o.On[i]
		if err := p.check("Redis"); err != nil {
			return nil, err
		}
		host := p.Addr.String()
		args := redisArgs(host, p.Port, p.Dir, d)
		for _, c := range o.Config {
			args = append(args, append([]string{"--" + c[0]}, c[1:]...)...)
		}
		s := spec{
			name: name, kind: kindRedis, port: p.Port, host: host, bin: p.binary(e.Programs.RedisServer), args: args, place: p,
			ready: redisReady(hostAddr(host, p.Port)), clock: redisTime, fakeClock: o.FakeClock, lazyFS: o.LazyFS,
		}
		node, err := e.startNode(ctx, s, false)
		if err != nil {
			return nil, err
		}
		nodes[i] = node
	}
	return nodes, nil
}

// redisArgs is the command line of a redis-server listening on host:port
// that keeps its files in dir and fsyncs as d says.
func redisArgs(host string, port int, dir string, d Durability) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", host,
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--logfile", "",
		"--maxclients", "10000",
	}
	switch d {
	case DurabilityDurable:
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	case DurabilityPeriodic:
		return append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	return append(args, "--appendonly", "no")
}

// redisReady answers nil once the server at addr replies to PING (and has
// finished loading its data).
func redisReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
}

// redisTime reads the wall clock of the server at addr: TIME.
func redisTime(ctx context.Context, addr string) (time.Time, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return c.Time(ctx).Result()
}
