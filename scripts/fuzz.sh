#!/usr/bin/env bash
# Runs every fuzz target of a parser of outside input briefly, one at a
# time (go test runs one -fuzz target per package and command). A failing
# input is written under the package's testdata/fuzz and fails the run;
# commit it with the fix, and it stays a test case of plain go test.
#   scripts/fuzz.sh            run by make test and make fuzz
#   FUZZTIME=1m scripts/fuzz.sh
#
# By default each target runs a number of inputs (-fuzztime Nx, about ten
# seconds each on a quiet 2-core machine), not a duration: up to Go 1.26 a
# duration races the coordinator's deadline against its workers and, on a
# busy machine, fails a target with a bare "context deadline exceeded" and
# no failing input (go.dev/issue/75804, fixed in Go 1.27). A count has no
# deadline to race. FUZZTIME, when set, applies to every target as given.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(
  "./inventory FuzzParse 40000"          # the inventory YAML
  "./nemesis FuzzParse 50000"            # fault specs: client-pause?x=3
  "./bench FuzzParseBackend 10000"       # backend specs: redlock?fencing=true
  "./history FuzzReadFile 8000"          # history files, and the checkers over them
  "./judge FuzzWire 30000"               # the judge's wire protocol
  "./results FuzzRead 15000"             # results.json
  "./results FuzzDecode 60000"           # its HDR histograms
  "./results FuzzReadEnvelopes 5000"     # lockbench envelope's results.json
)
start=$(date +%s)
for t in "${targets[@]}"; do
  set -- $t
  budget=${FUZZTIME:-${3}x}
  echo "fuzz: $1 $2 for $budget"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$budget" "$1"
done
echo "fuzz: ${#targets[@]} targets in $(( $(date +%s) - start ))s"
