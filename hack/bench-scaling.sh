#!/usr/bin/env bash
# How the whole suite's cost grows with the nodes (`make bench-scaling`,
# issue 43 item 5): the same selection (BENCH_TAGS) run once per node count,
# on BENCH_REAL_NODES real nodes (root) and on BENCH_SIMULATED_NODES simulated
# ones, one run after another, each through hack/bench-suite.sh (the runner's
# --timings and the process's wall against the run's floor). Then a table:
# result, run, floor, run/floor, wall, the wall of the fewest nodes of the
# same kind over this one's, and the fixed cost per scenario. A node count
# that does not run through (a cluster that does not start, say) is shown
# with the last lines of its log, and the others still run.
#
#   hack/bench-scaling.sh [RUNNER-ARGS...]   the runs, then the table
#   hack/bench-scaling.sh report             the table of the last runs again
#
#   BENCH_REAL_NODES="2 6 12"        real node counts (empty: none, no root needed)
#   BENCH_SIMULATED_NODES="2 20 100" simulated node counts (empty: none)
#   BENCH_TAGS=@DynamicResourceAllocation   the selection of every run
#   BENCH_DIR=DIR     logs and JUnit reports (default target/bench-scaling); emptied by a run
#   DRA_E2E_BIN=PATH  the runner (default: cargo build, target/debug/dra-e2e)
#   DRA_E2E_BINARIES_DIR, DRA_E2E_NODE_BINARIES_DIR   as for the runner (default: built)
#
# Exit status: 0 when every run passed, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
log_prefix=bench-scaling
. "$here/lib.sh"
cd "$root"

dir=${BENCH_DIR:-$root/target/bench-scaling}
real=${BENCH_REAL_NODES-2 6 12}
simulated=${BENCH_SIMULATED_NODES-2 20 100}
tags=${BENCH_TAGS:-@DynamicResourceAllocation}

die() { echo "bench-scaling: $*" >&2; exit 1; }
now() { date +%s.%N; }
command -v python3 >/dev/null || die "needs python3 (hack/bench-report.py reads the logs and JUnit reports)"

report() {
  [[ -f "$dir/runs.tsv" ]] || die "no runs in $dir (run \`hack/bench-scaling.sh\` first)"
  python3 "$here/bench-report.py" scaling "$dir" | tee "$dir/report.txt"
}

if [[ "${1:-}" == report ]]; then report; exit 0; fi

for n in $real $simulated; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "node count $n: expected a positive number"
done
[[ -z "$real" || $(id -u) == 0 ]] || die "real nodes need root (BENCH_REAL_NODES= runs simulated nodes only)"

# Each run in a process group of its own (lib.sh's in_group), which an
# interrupt or error here stops.
trap 'stop_group "the running suite"' EXIT
trap 'exit 130' INT TERM

built=${DRA_E2E_BIN:-}
if [[ -z "$built" ]]; then
  log "building the runner"
  cargo build --quiet
  built=$root/target/debug/dra-e2e
fi
[[ -x "$built" ]] || die "DRA_E2E_BIN=$built is not an executable"
: "${DRA_E2E_BINARIES_DIR:=$("$here/build-controlplane.sh")}"
export DRA_E2E_BINARIES_DIR
if [[ -n "$real" ]]; then
  : "${DRA_E2E_NODE_BINARIES_DIR:=$("$here/build-node.sh")}"
  export DRA_E2E_NODE_BINARIES_DIR
fi

rm -rf "$dir"
# The runs use a copy of the runner (lib.sh).
copy_runner "$built" "$dir"
bin=$dir/bin/dra-e2e
: >"$dir/runs.tsv"
status=0
for kind in real simulated; do
  counts=$real
  [[ $kind == simulated ]] && counts=$simulated
  for n in $counts; do
    name=$kind-$n
    log "the suite ($tags) on $n $kind nodes (output: $dir/$name.out)"
    start=$(now)
    in_group "$dir/$name.out" env BENCH_LOG="$dir/$name.log" DRA_E2E_BIN="$bin" "$here/bench-suite.sh" "$n $kind nodes" \
      --cluster local --node-kind "$kind" --nodes "$n" --tags "$tags" --junit "$dir/$name.xml" "$@"
    wall=$(sed -n 's/^bench (.*): floor .* wall \([0-9.]*\) s .*/\1/p' "$dir/$name.out")
    # No bench line: the run printed no floor; the wall is taken from outside.
    [[ -n "$wall" ]] || wall=$(awk -v s="$start" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }')
    # The log of a run bench-suite.sh could not start is its own output.
    [[ -f "$dir/$name.log" ]] || cp "$dir/$name.out" "$dir/$name.log"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$n" "$rc" "$wall" "$dir/$name.log" "$dir/$name.xml" >>"$dir/runs.tsv"
    log "$(grep -E '^bench \(' "$dir/$name.out" || echo "$n $kind nodes: exit $rc, no timings")"
    (( rc == 0 )) || status=1
  done
done
report
exit "$status"
