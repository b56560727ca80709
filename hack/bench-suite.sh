#!/usr/bin/env bash
# Runs the suite once with --timings and prints, besides the runner's own
# figures, the process's wall time against the suite's floor (cluster start
# and the longest scenario, as the run measured them), the ratio the project
# tracks. Usage: [BENCH_LOG=FILE] hack/bench-suite.sh LABEL RUNNER-ARGS...
set -euo pipefail
label=$1
shift
bin=${DRA_E2E_BIN:-target/debug/dra-e2e}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
status=0
"$bin" --timings "$@" >"$out" 2>&1 || status=$?
end=$(date +%s.%N)
# The whole output, for a run that failed (BENCH_LOG=FILE keeps it).
if [[ -n ${BENCH_LOG:-} ]]; then cp "$out" "$BENCH_LOG"; fi
sed -n '/^run:/,$p' "$out"
floor=$(sed -n 's/^floor: \([0-9.]*\)s.*/\1/p' "$out")
if [[ -z $floor ]]; then
  tail -n 30 "$out"
  echo "bench ($label): the run printed no floor (exit $status)" >&2
  exit 1
fi
awk -v l="$label" -v s="$start" -v e="$end" -v f="$floor" -v st="$status" 'BEGIN {
  printf "bench (%s): floor %.1f s, wall %.1f s (the process, cluster stop included), wall/floor %.2f, exit %d\n", l, f, e - s, (e - s) / f, st
}'
exit "$status"
