package compose

import (
	"os"
	"path/filepath"
)

// Programs are the programs an Env runs on this machine and what they
// need: one field per server kind's binary or account, and the C compiler
// of the clock preload. A server placed on a host may name a binary of
// its own there (Placement.Binary); where it does not, the same name is
// used on the host.
type Programs struct {
	// RedisServer is the redis-server binary (Redis and Sentinel sets).
	RedisServer string
	// RedisSentinel is the redis-sentinel binary.
	RedisSentinel string
	// Java is the java binary that runs ZooKeeper.
	Java string
	// ZooKeeperClasspath is the classpath of a ZooKeeper server: Debian's
	// package (whose jar names its other dependencies in its manifest)
	// and a log4j binding for slf4j, so that the servers log.
	ZooKeeperClasspath []string
	// CC is the C compiler that builds the clock preload, on each host
	// where a server runs under it.
	CC string
}

// The environment variables DefaultPrograms reads, one per field of
// Programs. A classpath is a list of paths (os.PathListSeparator).
const (
	RedisServerEnv        = "LOCKBENCH_REDIS_SERVER"
	RedisSentinelEnv      = "LOCKBENCH_REDIS_SENTINEL"
	JavaEnv               = "LOCKBENCH_JAVA"
	ZooKeeperClasspathEnv = "LOCKBENCH_ZOOKEEPER_CLASSPATH"
	CCEnv                 = "LOCKBENCH_CC"
)

// DefaultPrograms returns Debian's programs (the ones make deps
// installs), each replaced by its environment variable when that is set:
// New gives every Env these.
func DefaultPrograms() Programs {
	p := Programs{
		RedisServer:   "redis-server",
		RedisSentinel: "redis-sentinel",
		Java:          "java",
		ZooKeeperClasspath: []string{
			"/etc/zookeeper/conf",
			"/usr/share/java/zookeeper.jar",
			"/usr/share/java/slf4j-log4j12.jar",
			"/usr/share/java/log4j-1.2.jar",
		},
		CC: "gcc",
	}
	for env, field := range map[string]*string{
		RedisServerEnv: &p.RedisServer, RedisSentinelEnv: &p.RedisSentinel, JavaEnv: &p.Java,
		CCEnv: &p.CC,
	} {
		if v := os.Getenv(env); v != "" {
			*field = v
		}
	}
	if v := os.Getenv(ZooKeeperClasspathEnv); v != "" {
		p.ZooKeeperClasspath = filepath.SplitList(v)
	}
	return p
}
