#!/usr/bin/env bash
# Runs every fuzz target of a parser of outside input briefly, one at a
# time (go test runs one -fuzz target per package and command). A failing
# input is written under the package's testdata/fuzz and fails the run;
# commit it with the fix, and it stays a test case of plain go test.
#   scripts/fuzz.sh            run by make test and make fuzz
#   FUZZTIME=1m scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
targets=(
  "./inventory FuzzParse"          # the inventory YAML
  "./nemesis FuzzParse"            # fault specs: client-pause?x=3
  "./bench FuzzParseBackend"       # backend specs: redlock?fencing=true
  "./history FuzzReadFile"         # history files, and the checkers over them
  "./judge FuzzWire"               # the judge's wire protocol
  "./results FuzzRead"             # results.json
  "./results FuzzDecode"           # its HDR histograms
)
start=$(date +%s)
for t in "${targets[@]}"; do
  set -- $t
  echo "fuzz: $1 $2 for $fuzztime"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "$1"
done
echo "fuzz: ${#targets[@]} targets in $(( $(date +%s) - start ))s"
