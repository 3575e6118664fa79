#!/usr/bin/env bash
# Checks that the library is its own thing: a consumer module at the
# library's go directive (go 1.22) that requires backends/redlock keeps
# that directive after `go mod tidy`, builds, and imports nothing but
# go-redis, OpenTelemetry, locker and the standard library (and their
# own dependencies). The consumer lives in a temporary dir and reaches
# the library through a replace to this checkout; modules come from
# GOPROXY as the environment has it.
#   scripts/consumer.sh        run by make test
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
want=$(awk '$1 == "go" { print $2; exit }' "$root/backends/redlock/go.mod")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/go.mod" <<MOD
module example.com/consumer

go $want

require github.com/lockbench/lockbench/backends/redlock v0.0.0

replace (
	github.com/lockbench/lockbench/backends/redlock => $root/backends/redlock
	github.com/lockbench/lockbench/locker => $root/locker
)
MOD
cat >"$dir/main.go" <<'GO'
// Command consumer takes and gives back one lock: an adopter of the library.
package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

func main() {
	rl, err := redlock.New([]*redis.Client{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})})
	if err != nil {
		panic(err)
	}
	defer rl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, _ = rl.TryAcquire(ctx, "k", locker.WithTTL(time.Second))
}
GO
cd "$dir"
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
go mod tidy
got=$(awk '$1 == "go" { print $2; exit }' go.mod)
if [ "$got" != "$want" ]; then
  echo "consumer: go mod tidy moved the consumer's go directive from $want to $got:" >&2
  go list -m -f '{{.Path}} {{.Version}} go {{.GoVersion}}' all >&2
  exit 1
fi
go vet ./...
go build -o /dev/null .
# Every package the consumer builds: the standard library (no dot in the
# first element), the library and locker, go-redis, OpenTelemetry and
# what those two import themselves.
allowed='^(example\.com/consumer|github\.com/lockbench/lockbench/(locker|backends/redlock)|github\.com/redis/go-redis/v9|go\.opentelemetry\.io/|github\.com/go-logr/|github\.com/cespare/xxhash/v2|github\.com/dgryski/go-rendezvous)'
others=$(go list -deps . | awk -F/ '$1 ~ /\./' | grep -Ev "$allowed" || true)
if [ -n "$others" ]; then
  echo "consumer: the library brings packages beyond go-redis and OpenTelemetry:" >&2
  echo "$others" >&2
  exit 1
fi
echo "consumer: go $want kept after go mod tidy; deps: $(go list -deps . | awk -F/ '$1 ~ /\./' | sed -E 's#^(github\.com/[^/]+/[^/]+|go\.opentelemetry\.io/[^/]+|[^/]+/[^/]+).*#\1#' | sort -u | tr '\n' ' ')"
