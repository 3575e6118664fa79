// Package all registers every lockbench backend: import it for its side
// effect, as the CLI does.
package all

import (
	_ "github.com/lockbench/lockbench/backends/etcd"           // leases + revisions
	_ "github.com/lockbench/lockbench/backends/noop"           // no exclusion: the control
	_ "github.com/lockbench/lockbench/backends/postgres"       // advisory locks and a fenced lease table
	_ "github.com/lockbench/lockbench/backends/redis"          // single Redis
	_ "github.com/lockbench/lockbench/backends/redlockbackend" // our Redlock (the library registers nothing)
	_ "github.com/lockbench/lockbench/backends/redsync"        // the reference Go Redlock
	_ "github.com/lockbench/lockbench/backends/rueidislock"    // the Redis maintainers' Go lock
	_ "github.com/lockbench/lockbench/backends/sentinel"       // master–replica + Sentinel
	_ "github.com/lockbench/lockbench/backends/zookeeper"      // ephemeral sequential znodes
)
