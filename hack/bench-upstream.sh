#!/usr/bin/env bash
# Upstream's [DRA] suite and dra-e2e's scenarios that port the same tests,
# back to back on two real local nodes, side by side (`make bench-upstream`,
# root, issue 43 item 4).
#
# Same node count, not one cluster: each side starts its own local cluster of
# BENCH_NODES (2) real nodes, as it does on its own. Upstream's cut-down
# dra.test runs through hack/upstream-e2e.sh (`dra-e2e cluster up --node-kind
# real`, then ginkgo with UPSTREAM_PROCS processes); then the runner runs, on
# a cluster it starts (`--cluster local --node-kind real`, its default
# concurrency), exactly the scenarios that port the tests upstream ran:
# upstream's JUnit report names the specs that ran, `dra-e2e upstream` (the
# table of docs/upstream-tests.md, from docs/upstream-tests.tsv) the
# feature:line of the scenarios porting each, and those are selected with
# `--features FILE... --name REGEX`, checked against `--list` before the run.
# A title --name cannot tell from a scenario porting no test upstream ran
# would run too; it is named and kept out of the comparison.
#
# Prints both walls, each test's time on both sides (upstream's spec time in
# its JUnit report; ours the scenario's in ours, its own time as ginkgo's is:
# without what it waited for a slot or its nodes), the ratio of the summed
# times of the tests both sides passed, and the median of the per-test ratios.
#
#   hack/bench-upstream.sh [run] [RUNNER-ARGS...]   both runs, then the figures
#   hack/bench-upstream.sh ours [RUNNER-ARGS...]    our side again against the upstream run
#                                                   kept in BENCH_DIR (same runner copy)
#   hack/bench-upstream.sh report                   the figures of the last run again
#
#   BENCH_DIR=DIR    reports and logs (default target/bench-upstream); emptied by `run`
#   BENCH_NODES=N    real nodes of each cluster (default 2)
#   UPSTREAM_FOCUS, UPSTREAM_SKIP, UPSTREAM_LABELS, UPSTREAM_PROCS   as for hack/upstream-e2e.sh
#   DRA_E2E_BIN=PATH the runner (default: cargo build, target/debug/dra-e2e)
#   DRA_E2E_BINARIES_DIR, DRA_E2E_NODE_BINARIES_DIR   as for the runner (default: built)
#
# Exit status: 0 when both sides passed every test they ran, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
log_prefix=bench-upstream
. "$here/lib.sh"
cd "$root"

dir=${BENCH_DIR:-$root/target/bench-upstream}
nodes=${BENCH_NODES:-2}
cmd=${1:-run}
[[ $# -gt 0 ]] && shift

die() { echo "bench-upstream: $*" >&2; exit 1; }
now() { date +%s.%N; }
command -v python3 >/dev/null || die "needs python3 (hack/bench-report.py reads the JUnit reports)"

report() {
  [[ -f "$dir/walls.env" ]] || die "no finished run in $dir (run \`hack/bench-upstream.sh run\` first)"
  python3 "$here/bench-report.py" upstream "$dir" | tee "$dir/report.txt"
}

case "$cmd" in
  report) report; exit 0 ;;
  run | ours) ;;
  *) echo "usage: $0 [run [RUNNER-ARGS...] | ours [RUNNER-ARGS...] | report]" >&2; exit 2 ;;
esac

[[ $(id -u) == 0 ]] || die "real nodes need root"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "BENCH_NODES=$nodes: expected a node count"

# Each side runs in a process group of its own (lib.sh's in_group), which
# an interrupt or error here stops.
trap 'stop_group "the running side"' EXIT
trap 'exit 130' INT TERM

# Runs "$@" as one side, output to $1's file; sets rc.
side() { in_group "$@"; }

if [[ $cmd == run ]]; then
  built=${DRA_E2E_BIN:-}
  if [[ -z "$built" ]]; then
    log "building the runner"
    cargo build --quiet
    built=$root/target/debug/dra-e2e
  fi
  [[ -x "$built" ]] || die "DRA_E2E_BIN=$built is not an executable"
  : "${DRA_E2E_BINARIES_DIR:=$("$here/build-controlplane.sh")}"
  : "${DRA_E2E_NODE_BINARIES_DIR:=$("$here/build-node.sh")}"
  export DRA_E2E_BINARIES_DIR DRA_E2E_NODE_BINARIES_DIR
  "$here/upstream-e2e.sh" build >/dev/null

  rm -rf "$dir"
  # The runs use a copy of the runner (lib.sh).
  copy_runner "$built" "$dir"
  bin=$dir/bin/dra-e2e

  # Upstream first: its report says which tests ran.
  log "upstream's suite on $nodes real nodes (output: $dir/upstream.out)"
  start=$(now)
  side "$dir/upstream.out" env UPSTREAM_NODES="$nodes" UPSTREAM_REPORT_DIR="$dir/upstream" DRA_E2E="$bin" "$here/upstream-e2e.sh" run
  up_rc=$rc
  up_wall=$(awk -v s="$start" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }')
  summary=$(grep -E '^upstream .* real nodes: ' "$dir/upstream.out" || true)
  up_ginkgo=$(sed -n 's/.*(wall \([0-9]*\)s, \([0-9]*\) processes).*/\1/p' <<<"$summary")
  up_procs=$(sed -n 's/.*(wall \([0-9]*\)s, \([0-9]*\) processes).*/\2/p' <<<"$summary")
  if [[ -z "$up_ginkgo" || ! -f "$dir/upstream/junit_01.xml" ]]; then
    tail -n 30 "$dir/upstream.out" >&2
    die "upstream's run gave no summary or no JUnit report (exit $up_rc; $dir/upstream.out)"
  fi
  log "$summary"
  cat >"$dir/upstream.env" <<EOF
UPSTREAM_RC=$up_rc
UPSTREAM_PROCS=$up_procs
UPSTREAM_GINKGO=$up_ginkgo
UPSTREAM_WALL=$up_wall
EOF
else
  [[ -f "$dir/upstream.env" && -f "$dir/upstream/junit_01.xml" && -x "$dir/bin/dra-e2e" ]] ||
    die "no upstream run kept in $dir (\`hack/bench-upstream.sh run\` makes one)"
  bin=$dir/bin/dra-e2e
  : "${DRA_E2E_BINARIES_DIR:=$("$here/build-controlplane.sh")}"
  : "${DRA_E2E_NODE_BINARIES_DIR:=$("$here/build-node.sh")}"
  export DRA_E2E_BINARIES_DIR DRA_E2E_NODE_BINARIES_DIR
  rm -f "$dir"/dra-e2e.* "$dir/walls.env" "$dir/report.txt"
  log "our side again, against upstream's run kept in $dir"
fi

# Which of our scenarios port the tests that ran.
"$bin" upstream >"$dir/table.md"
"$bin" --features features --list >"$dir/all-scenarios.txt"
python3 "$here/bench-report.py" select "$dir" >"$dir/selection.txt"
mapfile -t selection <"$dir/selection.txt"
(( ${#selection[@]} >= 2 )) || die "no scenario ports a test upstream ran ($dir/selection.json)"
regex=${selection[-1]}
features=()
for f in "${selection[@]:0:${#selection[@]}-1}"; do features+=(--features "$f"); done
"$bin" "${features[@]}" --name "$regex" --list >"$dir/selected.txt"
python3 "$here/bench-report.py" check-list "$dir" "$dir/selected.txt" >&2

log "dra-e2e's ports of those tests on $nodes real nodes (output: $dir/dra-e2e.out)"
side "$dir/dra-e2e.out" env BENCH_LOG="$dir/dra-e2e.log" DRA_E2E_BIN="$bin" "$here/bench-suite.sh" \
  "ports of upstream's tests, $nodes real nodes" --cluster local --node-kind real --nodes "$nodes" \
  "${features[@]}" --name "$regex" --junit "$dir/dra-e2e.xml" "$@"
ours_rc=$rc
bench=$(grep -E '^bench \(' "$dir/dra-e2e.out" || true)
ours_wall=$(sed -n 's/.* wall \([0-9.]*\) s .*/\1/p' <<<"$bench")
ours_run=$(sed -n 's/^run: \([0-9.]*\)s for .*/\1/p' "$dir/dra-e2e.out")
if [[ -z "$ours_wall" || -z "$ours_run" || ! -f "$dir/dra-e2e.xml" ]]; then
  tail -n 30 "$dir/dra-e2e.out" >&2
  die "dra-e2e's run gave no timings or no JUnit report (exit $ours_rc; $dir/dra-e2e.log)"
fi
log "$bench"

{ cat "$dir/upstream.env"; cat <<EOF
OURS_RC=$ours_rc
OURS_RUN=$ours_run
OURS_WALL=$ours_wall
EOF
} >"$dir/walls.env"
report
grep -qx UPSTREAM_RC=0 "$dir/upstream.env" && (( ours_rc == 0 ))
