package redis

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
)

// Options is what standalone Redis nodes take beyond a compose.Spec.
type Options struct {
	// Config holds extra redis.conf directives, each as a name and its
	// arguments, e.g. {"maxmemory", "100mb"}.
	Config [][]string
	// Programs are the nodes' programs on this machine; a field left
	// empty is DefaultPrograms'.
	Programs Programs
}

// Programs are what a Redis node needs on this machine. A node placed on
// a host runs its placement's Binary there, or the same name.
type Programs struct {
	// Server is the redis-server binary.
	Server string
}

// ServerEnv is the environment variable DefaultPrograms reads for
// Programs.Server.
const ServerEnv = "LOCKBENCH_REDIS_SERVER"

// DefaultPrograms returns Debian's redis-server (the one make deps
// installs), replaced by $LOCKBENCH_REDIS_SERVER when that is set.
func DefaultPrograms() Programs {
	return Programs{Server: cmp.Or(os.Getenv(ServerEnv), "redis-server")}
}

// Rules are what standalone Redis nodes accept of a compose.Spec: every
// mechanism; with Netns each listens on port 6379 of its address.
var Rules = compose.Rules{Nodes: "Redis nodes", Min: 1, Durability: compose.DurabilityFast}

// StartServers starts s.Nodes standalone redis-server nodes in env
// (independent masters, as Redlock wants them), here or on the hosts s.On
// names, and waits until each answers PING. Redis expires keys by its
// wall clock, which FakeClock moves.
func StartServers(ctx context.Context, env *compose.Env, s compose.Spec, o Options) ([]*compose.Node, error) {
	s, err := s.Resolve(Rules)
	if err != nil {
		return nil, err
	}
	server := cmp.Or(o.Programs.Server, DefaultPrograms().Server)
	var (
		bin string
		l   compose.Layout
	)
	if s.On != nil {
		l, err = compose.LayOutOn("Redis", s.On)
	} else if bin, err = exec.LookPath(server); err != nil {
		return nil, fmt.Errorf("redis: %w (install Debian's redis-server: make deps)", err)
	} else {
		l, err = env.LayOut(s.Nodes, s.Netns, 6379)
	}
	if err != nil {
		return nil, err
	}
	nodes := make([]*compose.Node, s.Nodes)
	for i, name := range env.NewNames("redis", s.Nodes) {
		host, port := l.Hosts[i], l.Ports[i][0]
		ns := compose.NodeSpec{Name: name, Port: port, Binary: bin, Ready: Ready(compose.HostAddr(host, port)), Clock: ServerTime}
		l.Place(&ns, i)
		if l.Places != nil {
			ns.Binary = cmp.Or(l.Places[i].Binary, server)
		}
		ns.Args = Args(host, port, env.NodeDir(ns), s.Durability)
		for _, c := range o.Config {
			ns.Args = append(ns.Args, append([]string{"--" + c[0]}, c[1:]...)...)
		}
		if nodes[i], err = env.StartNode(ctx, s, ns); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// Args is the command line of a redis-server listening on host:port that
// keeps its files in dir and fsyncs as d says: what every Redis node
// lockbench starts runs with (a Sentinel set's too, written as its
// redis.conf).
func Args(host string, port int, dir string, d compose.Durability) []string {
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
	case compose.DurabilityDurable:
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	case compose.DurabilityPeriodic:
		return append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	return append(args, "--appendonly", "no")
}

// Ready returns a readiness probe (compose.NodeSpec.Ready) that answers
// nil once the server at addr replies to PING (and has finished loading
// its data).
func Ready(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
}

// ServerTime reads the wall clock of the server at addr with TIME
// (compose.NodeSpec.Clock).
func ServerTime(ctx context.Context, addr string) (time.Time, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return c.Time(ctx).Result()
}
