package main

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/lockbench/lockbench/compose"
)

// versions reports the versions of lockbench and of the servers it runs,
// for results.json: what a reader needs to reproduce a run.
func versions(ctx context.Context) map[string]string {
	v := compose.Versions(ctx)
	v["go"], v["lockbench"] = runtime.Version(), "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v["lockbench"] = s.Value
			}
		}
	}
	return v
}
