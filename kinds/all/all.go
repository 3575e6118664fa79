// Package all registers every server kind lockbench starts: import it
// for its side effect, as the runner does.
package all

import (
	_ "github.com/lockbench/lockbench/kinds/etcd"      // a cluster of etcd members
	_ "github.com/lockbench/lockbench/kinds/postgres"  // one PostgreSQL server
	_ "github.com/lockbench/lockbench/kinds/redis"     // standalone Redis masters
	_ "github.com/lockbench/lockbench/kinds/sentinel"  // master–replicas + Sentinel
	_ "github.com/lockbench/lockbench/kinds/zookeeper" // a ZooKeeper ensemble
)
