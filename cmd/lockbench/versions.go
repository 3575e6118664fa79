package main

import (
	"context"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"time"
)

// versions reports the versions of lockbench and of the servers it runs,
// for results.json: what a reader needs to reproduce a run.
func versions(ctx context.Context) map[string]string {
	v := map[string]string{"go": runtime.Version(), "lockbench": "devel"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v["lockbench"] = s.Value
			}
		}
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
