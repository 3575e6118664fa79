package remotetest

import (
	"context"
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
