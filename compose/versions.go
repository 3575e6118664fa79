package compose

import (
	"context"
	"os/exec"
	"regexp"
	"runtime/debug"
	"time"
)

// Versions returns the versions of the servers compose runs, by server
// ("redis-server", "java", "zookeeper", "postgres", "etcd"), for a run's
// record: what a reader needs to reproduce it. A server whose version
// cannot be read is left out. etcd's is the module the running binary
// was built with, which `go build` of cmd/etcd-member shares.
func Versions(ctx context.Context) map[string]string {
	v := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "go.etcd.io/etcd/client/v3" {
				v["etcd"] = d.Version
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	probe := func(name, re string, args ...string) {
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return
		}
		if m := regexp.MustCompile(re).FindStringSubmatch(string(out)); m != nil {
			v[name] = m[1]
		}
	}
	probe("redis-server", `v=(\S+)`, "redis-server", "--version")
	probe("java", `version "([^"]+)"`, "java", "-version")
	// ZooKeeper and PostgreSQL come from Debian's packages.
	probe("zookeeper", `^(\S+)$`, "dpkg-query", "-W", "-f=${Version}", "zookeeper")
	probe("postgres", `^(\S+)$`, "dpkg-query", "-W", "-f=${Version}", "postgresql")
	return v
}
