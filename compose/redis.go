package compose

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions is what standalone Redis nodes take beyond a Spec.
type RedisOptions struct {
	// Config holds extra redis.conf directives, each as a name and its
	// arguments, e.g. {"maxmemory", "100mb"}.
	Config [][]string
}

// redisRules are what standalone Redis nodes accept of a Spec: every
// mechanism; with Netns each listens on port 6379 of its address.
var redisRules = kindRules{nodes: "Redis nodes", min: 1, durability: DurabilityFast}

// Redis starts s.Nodes standalone redis-server nodes (independent
// masters, as Redlock wants them) and waits until each answers PING.
// Redis expires keys by its wall clock, which FakeClock moves.
func (e *Env) Redis(ctx context.Context, s Spec, o RedisOptions) ([]*Node, error) {
	s, err := s.resolve(redisRules)
	if err != nil {
		return nil, err
	}
	if s.On != nil {
		return e.redisOn(ctx, s, o)
	}
	bin, err := exec.LookPath(e.Programs.RedisServer)
	if err != nil {
		return nil, fmt.Errorf("compose: %w (install Debian's redis-server: make deps)", err)
	}
	l, err := e.layOut(s.Nodes, s.Netns, 6379)
	if err != nil {
		return nil, err
	}
	nodes := make([]*Node, s.Nodes)
	for i, name := range e.newNames("redis", s.Nodes) {
		host, port := l.hosts[i], l.ports[i][0]
		sp := spec{
			name: name, kind: kindRedis, port: port, bin: bin, args: redisConfigArgs(host, port, filepath.Join(e.Dir, name), s.Durability, o),
			ready:  redisReady(hostAddr(host, port)),
			clock:  redisTime,
			lazyFS: s.LazyFS, fakeClock: s.FakeClock,
		}
		l.place(&sp, i)
		node, err := e.startNode(ctx, sp, s.Proxied)
		if err != nil {
			return nil, err
		}
		nodes[i] = node
	}
	return nodes, nil
}

// redisOn starts Redis nodes placed on hosts (s resolved).
func (e *Env) redisOn(ctx context.Context, s Spec, o RedisOptions) ([]*Node, error) {
	nodes := make([]*Node, s.Nodes)
	for i, name := range e.newNames("redis", s.Nodes) {
		p := &s.On[i]
		if err := p.check("Redis"); err != nil {
			return nil, err
		}
		host := p.Addr.String()
		sp := spec{
			name: name, kind: kindRedis, port: p.Port, host: host, bin: p.binary(e.Programs.RedisServer), place: p,
			args:  redisConfigArgs(host, p.Port, p.Dir, s.Durability, o),
			ready: redisReady(hostAddr(host, p.Port)), clock: redisTime, fakeClock: s.FakeClock, lazyFS: s.LazyFS,
		}
		node, err := e.startNode(ctx, sp, false)
		if err != nil {
			return nil, err
		}
		nodes[i] = node
	}
	return nodes, nil
}

// redisConfigArgs is redisArgs with o's extra directives.
func redisConfigArgs(host string, port int, dir string, d Durability, o RedisOptions) []string {
	args := redisArgs(host, port, dir, d)
	for _, c := range o.Config {
		args = append(args, append([]string{"--" + c[0]}, c[1:]...)...)
	}
	return args
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
