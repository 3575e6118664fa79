package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/lockbench/lockbench/kinds"
)

// versions reports the versions of lockbench and of the servers it runs,
// for results.json: what a reader needs to reproduce a run.
func versions(ctx context.Context) map[string]string {
	v := kinds.Versions(ctx)
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

// commit is the VCS commit the binary was built from, as the Makefile
// passes it (-ldflags -X main.commit=...), for a toolchain that does not
// stamp VCS information into the build (GOFLAGS=-buildvcs=false); the
// build information's vcs.revision wins when there is one.
var commit string

// buildVersion is what lockbench --version prints: the module version the
// binary was built as ("(devel)" from a checkout), the VCS commit it was
// built from, marked "+dirty" when the tree had changes, and its Go.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information) " + runtime.Version()
	}
	version, rev, dirty := bi.Main.Version, "unknown commit", ""
	if commit != "" {
		rev = "commit " + commit
	}
	if version == "" {
		version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = "commit " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	return fmt.Sprintf("%s %s%s %s", version, rev, dirty, runtime.Version())
}
