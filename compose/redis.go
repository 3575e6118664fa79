package compose

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
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
var redisRules = Rules{Nodes: "Redis nodes", Min: 1, Durability: DurabilityFast}

// Redis starts s.Nodes standalone redis-server nodes (independent
// masters, as Redlock wants them) and waits until each answers PING.
// Redis expires keys by its wall clock, which FakeClock moves.
func (e *Env) Redis(ctx context.Context, s Spec, o RedisOptions) ([]*Node, error) {
	s, err := s.Resolve(redisRules)
	if err != nil {
		return nil, err
	}
	var (
		bin string
		l   Layout
	)
	if s.On != nil {
		l, err = LayOutOn("Redis", s.On)
	} else if bin, err = exec.LookPath(e.Programs.RedisServer); err != nil {
		return nil, fmt.Errorf("compose: %w (install Debian's redis-server: make deps)", err)
	} else {
		l, err = e.LayOut(s.Nodes, s.Netns, 6379)
	}
	if err != nil {
		return nil, err
	}
	nodes := make([]*Node, s.Nodes)
	for i, name := range e.NewNames("redis", s.Nodes) {
		host, port := l.Hosts[i], l.Ports[i][0]
		ns := NodeSpec{Name: name, Port: port, Binary: bin, Ready: redisReady(HostAddr(host, port)), Clock: redisTime}
		l.Place(&ns, i)
		if l.Places != nil {
			ns.Binary = cmp.Or(l.Places[i].Binary, e.Programs.RedisServer)
		}
		ns.Args = redisConfigArgs(host, port, e.NodeDir(ns), s.Durability, o)
		if nodes[i], err = e.StartNode(ctx, s, ns); err != nil {
			return nil, err
		}
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
