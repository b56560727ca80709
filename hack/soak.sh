#!/usr/bin/env bash
# Runs the scenario suite N times in a row on a fresh local cluster each time
# and prints, per run, its result line, then every scenario that failed at
# least once with how often. Exit code 1 when any run failed.
#
#   hack/soak.sh N [runner arguments...]     e.g. hack/soak.sh 10 --tags @DynamicResourceAllocation
#
# SOAK_CHAOS=N (the local cluster only): each run also restarts N
# control-plane components, each one drawn at random from kube-apiserver,
# kube-scheduler and kube-controller-manager, and on real nodes
# (--node-kind real) N nodes' kubelets (the runner picks each node at
# random among those no scenario owns), at moments drawn at random within
# the first SOAK_CHAOS_WITHIN seconds of its scenarios (default 90)
# (--restart-control-plane, --restart-kubelet). The line of each run says
# which restarts it had and how many the runner carried out; a scenario
# that failed is listed with the restarts of the runs it failed in.
set -uo pipefail
runs=${1:?usage: hack/soak.sh N [runner arguments...]}
shift
cd "$(dirname "$0")/.."
. hack/lib.sh
out=target/soak
rm -rf "$out" && mkdir -p "$out"
cargo build --quiet || exit 1
# A copy, so that a build during the soak does not change what it runs.
copy_runner target/debug/dra-e2e "$out"
cat "$out/build.txt"
chaos=${SOAK_CHAOS:-0} within=${SOAK_CHAOS_WITHIN:-90}
components=(kube-apiserver kube-scheduler kube-controller-manager)
real=0
[[ " $* " == *" --node-kind real "* || " $* " == *" --node-kind=real "* ]] && real=1
failed_runs=0 injected=0
for i in $(seq 1 "$runs"); do
  plan=()
  for _ in $(seq 1 "$chaos"); do
    plan+=("${components[RANDOM % ${#components[@]}]}@$(( 5 + RANDOM % within ))s")
    (( real )) && plan+=("kubelet@$(( 5 + RANDOM % within ))s")
  done
  chaos_args=()
  for p in "${plan[@]}"; do
    case $p in
      kubelet@*) chaos_args+=(--restart-kubelet "${p#kubelet}") ;;
      *) chaos_args+=(--restart-control-plane "$p") ;;
    esac
  done
  echo "${plan[*]}" > "$out/run-$i.restarts"
  start=$SECONDS
  "$out/bin/dra-e2e" --cluster local --junit "$out/run-$i.xml" "${chaos_args[@]}" "$@" > "$out/run-$i.log" 2>&1
  rc=$?
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/run-$i.log" | tail -1)
  done_restarts=$(grep -cE -- '--restart-(control-plane|kubelet): restarted ' "$out/run-$i.log")
  injected=$(( injected + done_restarts ))
  restarts=""
  (( ${#plan[@]} > 0 )) && restarts=" (restarts ${plan[*]}: $done_restarts carried out)"
  echo "run $i/$runs: exit $rc in $(( SECONDS - start ))s: ${summary:-no summary (see $out/run-$i.log)}$restarts"
  (( rc == 0 )) || failed_runs=$(( failed_runs + 1 ))
done
echo "$(( runs - failed_runs )) of $runs runs passed"
(( chaos > 0 )) && echo "$injected restarts carried out in $runs runs"
# A failed test case is a <testcase ...> followed by <failure before </testcase>.
failures=$(for f in "$out"/run-*.xml; do
  [[ -f $f ]] || continue
  awk '/<testcase /{match($0, /name="[^"]*"/); name=substr($0, RSTART+6, RLENGTH-7)} /<failure/{print name}' "$f"
done | sort | uniq -c | sort -rn)
if [[ -n $failures ]]; then
  echo "scenarios that failed at least once (count, name):"
  echo "$failures"
  if (( chaos > 0 )); then
    echo "the runs they failed in, with their restarts:"
    for f in "$out"/run-*.xml; do
      n=$(awk '/<testcase /{match($0, /name="[^"]*"/); name=substr($0, RSTART+6, RLENGTH-7)} /<failure/{print name}' "$f")
      [[ -n $n ]] || continue
      r=${f%.xml}
      echo "  $(basename "$r"): restarts $(cat "$r.restarts"): $(echo "$n" | paste -sd ';' -)"
    done
  fi
fi
(( failed_runs == 0 ))
