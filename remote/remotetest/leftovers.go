package remotetest

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/remote"
)

// Processes lists the commands of the processes running on r's host (its
// own PID namespace on a simulated host) but its sshd and the shell,
// sudo and reader that run this very command: what a test expects to be
// gone once the servers and workers it started there are.
func Processes(ctx context.Context, r remote.Remote) ([]string, error) {
	out, err := remote.Output(ctx, r, "sh", "-c", `for f in /proc/[0-9]*/comm; do IFS= read -r c < "$f" 2>/dev/null && echo "$c"; done; true`)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, c := range strings.Fields(string(out)) {
		switch c {
		case "sshd", "sh", "sudo", "cat", "bash":
		default:
			left = append(left, c)
		}
	}
	return left, nil
}

// Leftovers lists what is left on r's host once a test's servers and
// workers should be gone: every process Processes lists ("process
// redis-server"), every cut still in force ("cut …"), and every entry of
// the directories dirs ("file /tmp/x/y"; shell patterns such as
// /tmp/data/* are expanded on the host, a directory that does not exist
// has no entries). Tests in several packages check a host this way after
// a run, so that what counts as left is said once.
func Leftovers(ctx context.Context, r remote.Remote, dirs ...string) ([]string, error) {
	procs, err := Processes(ctx, r)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, p := range procs {
		left = append(left, "process "+p)
	}
	cuts, err := remote.CutsInForce(ctx, r)
	if err != nil {
		return left, err
	}
	for _, c := range cuts {
		left = append(left, fmt.Sprintf("cut %v", c))
	}
	if len(dirs) == 0 {
		return left, nil
	}
	script := `for d in ` + strings.Join(dirs, " ") + `; do
	if [ -d "$d" ]; then ls -A "$d" | while IFS= read -r e; do echo "$d/$e"; done; fi
done; true`
	out, err := remote.Output(ctx, r, "sh", "-c", script)
	if err != nil {
		return left, err
	}
	for _, f := range strings.Fields(string(out)) {
		left = append(left, "file "+f)
	}
	return left, nil
}
