package remote

import (
	"context"
	"fmt"
	"strings"
)

// spawnScript starts a daemon with nothing but a shell: setsid puts it in
// a session of its own, detached from the command that started it (the
// SSH session ends without taking it along). The daemon's own shell
// prints its pid and start time — read from /proc/self/stat before it
// execs the program, so they are the program's — on a pipe that the
// starting shell reads to its end, which comes when the daemon has moved
// its output to the log: the pidfile is written before Spawn returns, and
// it names the daemon even if setsid had to fork.
//
// $1 pidfile, $2 log, $3 dir, then the program and its arguments.
const spawnScript = `set -e
PATH=$PATH:/usr/sbin:/sbin
pf=$1 log=${2:-/dev/null} dir=$3
shift 3
mkdir -p -- "$(dirname -- "$pf")"
[ -z "$dir" ] || cd -- "$dir"
: >> "$log"
daemon='lb_t0() { IFS= read -r s < /proc/self/stat; set -- ${s##*) }; t0=${20}; }
command -v -- "$1" >/dev/null || { echo "lockbench: $1: not found" >&2; exit 127; }
lb_t0
echo "$$ $t0"
exec >> "$LB_LOG" 2>&1 < /dev/null
unset LB_LOG
exec "$@"'
out=$(LB_LOG=$log setsid sh -c "$daemon" lockbench-daemon "$@" < /dev/null 2>> "$log" &)
case $out in
*' '*) ;;
*) echo "lockbench: $1 did not start: see $log" >&2; exit 1;;
esac
printf '%s\n%s\n' "${out% *}" "${out#* }" > "$pf.tmp"
mv -f -- "$pf.tmp" "$pf"`

// spawnShell is Spawn for a transport that can only run commands.
func spawnShell(ctx context.Context, r Remote, d Daemon) error {
	args := append([]string{"-c", spawnScript, "lockbench-spawn", d.Pidfile, d.Log, d.Dir, d.Path}, d.Args...)
	if err := r.Run(ctx, Cmd{Path: "sh", Args: args, Env: d.Env}); err != nil {
		return fmt.Errorf("remote: start %s on %s: %w", strings.TrimSpace(commandLine(d.Path, d.Args)), r.Name(), err)
	}
	return nil
}
