package main

import (
	"os"
	"path/filepath"

	"github.com/lockbench/lockbench/compose"
)

// serverEnv makes the run's dir out and the environment its servers run
// in, under out/servers: what an earlier run left there (its servers' data
// and logs) goes first.
func serverEnv(out string) (*compose.Env, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	servers := filepath.Join(out, "servers")
	if err := os.RemoveAll(servers); err != nil {
		return nil, err
	}
	return compose.New(servers)
}
