#!/usr/bin/env bash
# Runs the scenario suite N times in a row on a fresh local cluster each time
# and prints, per run, its result line, then every scenario that failed at
# least once with how often. Exit code 1 when any run failed.
#
#   hack/soak.sh N [runner arguments...]     e.g. hack/soak.sh 10 --tags @DynamicResourceAllocation
set -uo pipefail
runs=${1:?usage: hack/soak.sh N [runner arguments...]}
shift
cd "$(dirname "$0")/.."
out=target/soak
rm -rf "$out" && mkdir -p "$out"
cargo build --quiet || exit 1
failed_runs=0
for i in $(seq 1 "$runs"); do
  start=$SECONDS
  target/debug/dra-e2e --cluster local --junit "$out/run-$i.xml" "$@" > "$out/run-$i.log" 2>&1
  rc=$?
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/run-$i.log" | tail -1)
  echo "run $i/$runs: exit $rc in $(( SECONDS - start ))s: ${summary:-no summary (see $out/run-$i.log)}"
  (( rc == 0 )) || failed_runs=$(( failed_runs + 1 ))
done
echo "$(( runs - failed_runs )) of $runs runs passed"
# A failed test case is a <testcase ...> followed by <failure before </testcase>.
failures=$(for f in "$out"/run-*.xml; do
  [[ -f $f ]] || continue
  awk '/<testcase /{match($0, /name="[^"]*"/); name=substr($0, RSTART+6, RLENGTH-7)} /<failure/{print name}' "$f"
done | sort | uniq -c | sort -rn)
if [[ -n $failures ]]; then
  echo "scenarios that failed at least once (count, name):"
  echo "$failures"
fi
(( failed_runs == 0 ))
