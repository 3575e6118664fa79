package compose

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

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
