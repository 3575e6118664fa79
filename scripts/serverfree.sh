#!/usr/bin/env bash
# Checks that `make unit` needs nothing but Go: it runs `go test -short`
# in every module with the servers replaced by /bin/false (redis-server,
# redis-sentinel, java, PostgreSQL, sshd, chromium), in a mount namespace
# of its own where /bin/false is bind-mounted over each binary (as root
# with unshare), or else with a PATH whose first dir holds /bin/false
# under their names.
#   scripts/serverfree.sh      run by make test; prints make unit's time
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
names=(redis-server redis-sentinel redis-cli java postgres initdb pg_ctl sshd chromium)
bins=()
for n in "${names[@]}"; do
  p=$(command -v "$n" 2>/dev/null || true)
  [ -n "$p" ] && bins+=("$(readlink -f "$p")")
done
for p in /usr/lib/postgresql/*/bin/postgres /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pg_ctl /usr/sbin/sshd; do
  [ -e "$p" ] && bins+=("$(readlink -f "$p")")
done
# The benchmark's own binaries are not servers but are built by make:
# without them a -short test must not need them either.
unset LOCKBENCH_ETCD_MEMBER LOCKBENCH_BINARY
start=$(date +%s)
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  how="unshare -m, /bin/false bind-mounted over ${#bins[@]} binaries"
  unshare -m --propagation private bash -euo pipefail -c '
    root=$1; shift
    for b in "$@"; do mount --bind /bin/false "$b"; done
    if redis-server --version >/dev/null 2>&1; then echo "serverfree: redis-server still runs" >&2; exit 1; fi
    cd "$root" && make --no-print-directory unit' _ "$root" "${bins[@]}"
else
  how="PATH with /bin/false under the servers' names"
  fake=$(mktemp -d)
  trap 'rm -rf "$fake"' EXIT
  for n in "${names[@]}"; do ln -s /bin/false "$fake/$n"; done
  (cd "$root" && PATH="$fake:$PATH" make --no-print-directory unit)
fi
echo "serverfree: make unit passed without servers ($how) in $(( $(date +%s) - start ))s"
