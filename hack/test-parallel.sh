#!/usr/bin/env bash
# `make test`'s runner: builds every test binary once (`cargo test --no-run`
# with the arguments given before `--`), runs the doc tests, then runs the
# built executables as jobs (below), TEST_JOBS at a time (default 3), the
# longest first, each with the arguments after `--` (libtest's, e.g.
# --test-threads=2). Most of
# their time is spent waiting on the local clusters they start (control
# planes, simulated or real kubelet nodes), not on the CPU, so running them
# side by side saves most of the serial time.
#
#   hack/test-parallel.sh [cargo test options] [-- libtest options]
#   e.g. TEST_JOBS=3 hack/test-parallel.sh --features cluster-tests -- --test-threads=2
#
# The integration tests of each tier are one binary (tests/cluster.rs), so
# it is not run whole: each of its modules is a job of its own (the binary
# given that module's test names, `--exact`), labelled
# `tests/cluster.rs::<module>`, and the jobs are what runs side by side.
#
# Each job's output goes to target/test-logs/<job>.log and is printed whole
# when it ends, so the outputs do not interleave. Every job runs even when
# one fails; a table (job, result, seconds) ends the run, and the exit code
# is 1 when any failed, naming them. The order comes from the seconds the
# last run measured (target/test-logs/times.tsv; a job without a figure
# there goes first), or, without that file, from the fixed list below.
#
# The executables run as `cargo test` runs them: in their package's directory,
# with CARGO_MANIFEST_DIR and CARGO set. They are the files this build made
# (hard links to them), so a rebuild in the same target directory meanwhile
# does not change which test code runs (the dra-e2e and dra-e2e-agent programs
# the tests start are cargo's own files, as under `cargo test`).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cargo=${CARGO:-cargo}
cargo_path=$(command -v "$cargo") || { echo "test-parallel: no $cargo" >&2; exit 2; }
jobs=${TEST_JOBS:-3}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "test-parallel: TEST_JOBS must be a positive number, not '$jobs'" >&2; exit 2; }
cargo_args=() test_args=()
while (( $# )); do
  if [[ $1 == -- ]]; then shift; test_args=("$@"); break; fi
  cargo_args+=("$1"); shift
done

logs=target/test-logs
times=$logs/times.tsv
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/build.json

# The slow binaries of the last serial `make test` (CI, 2026-12-06), longest
# first: the order when target/test-logs/times.tsv has no figures yet.
c=tests/cluster.rs
fallback_order=(
  $c::real $c::runner $c::device_plugin $c::conformance
  $c::pool_status $c::fidelity_api $c::fidelity_kubelet $c::node_ops
  $c::node_allocatable $c::gaps $c::metadata $c::interposer
  $c::node_sim $c::proxy $c::local_cluster $c::workloads
)

# Jobs that run alone, after the others: the real-node module runs real
# nodes two tests at a time itself, and beside two other binaries its
# interposer broken variant (a stalled surge rollout on a real node, then
# the scenario's teardown) left its namespace behind in three of four runs
# on the 2-core machine (CI check 2026-12-06: "timed out after 60s waiting
# for the scenario's pods to be gone"), while alone, as it always ran
# before, it passed. TEST_ALONE (space-separated labels) overrides the list.
read -r -a alone <<< "${TEST_ALONE-tests/cluster.rs::real}"

# Every real node and control plane watches files with inotify; the kernel's
# default of 128 instances per user is too few for several clusters at once.
inotify_need=512
inotify=/proc/sys/fs/inotify/max_user_instances
if (( jobs > 1 )) && [[ -r $inotify ]] && (( $(<"$inotify") < inotify_need )); then
  if [[ $(id -u) == 0 ]] && echo "$inotify_need" > "$inotify" 2>/dev/null; then
    echo "test-parallel: raised fs.inotify.max_user_instances to $inotify_need for $jobs test binaries at once (was lower; not persistent)" >&2
  else
    echo "test-parallel: fs.inotify.max_user_instances is $(<"$inotify"), too few for $jobs test binaries at once: run as root, or sysctl -w fs.inotify.max_user_instances=$inotify_need, or TEST_JOBS=1" >&2
    exit 1
  fi
fi

started=$SECONDS
echo "test-parallel: building the test binaries: cargo test ${cargo_args[*]} --no-run" >&2
"$cargo" test "${cargo_args[@]}" --no-run --message-format=json-render-diagnostics > "$logs/build.json" \
  || { echo "test-parallel: the build failed" >&2; exit 1; }
build_seconds=$(( SECONDS - started ))

# The test executables, from cargo's JSON: label (the target's source, relative
# to the workspace), executable, package directory.
declare -A exe_of dir_of
labels=()
while IFS= read -r line; do
  [[ $line == *'"reason":"compiler-artifact"'* && $line =~ \"profile\":\{[^}]*\"test\":true ]] || continue
  [[ $line =~ \"executable\":\"([^\"]+)\" ]] || continue
  exe=${BASH_REMATCH[1]}
  [[ $line =~ \"src_path\":\"([^\"]+)\" ]] || continue
  label=${BASH_REMATCH[1]#"$root"/}
  [[ $line =~ \"manifest_path\":\"([^\"]+)\" ]] || continue
  [[ -n ${exe_of[$label]:-} ]] && continue
  exe_of[$label]=$exe dir_of[$label]=$(dirname "${BASH_REMATCH[1]}")
  labels+=("$label")
done < "$logs/build.json"
# A second name for each executable, beside it (its `deps/` directory is how
# the tests find dra-e2e-agent): a rebuild meanwhile writes a new file under
# cargo's name (the same name: cargo's hash does not change with the source),
# and the binaries still waiting run what this build made. Each is removed
# when its binary ends (it holds the old file's space after a rebuild).
snapshots=()
trap 'rm -f "${snapshots[@]}"' EXIT
for l in "${labels[@]}"; do
  if ln -f "${exe_of[$l]}" "${exe_of[$l]}.test-parallel" 2>/dev/null; then
    exe_of[$l]=${exe_of[$l]}.test-parallel
    snapshots+=("${exe_of[$l]}")
  fi
done
(( ${#labels[@]} > 0 )) || { echo "test-parallel: cargo named no test executables (see $logs/build.json)" >&2; exit 1; }

# A binary that is a tier of integration tests becomes a job per module:
# same executable, its own test names. `--list` runs nothing.
declare -A names_of
split_labels=()
for l in "${labels[@]}"; do
  if [[ $l != tests/cluster.rs ]]; then split_labels+=("$l"); continue; fi
  listed=$(cd "${dir_of[$l]}" && "${exe_of[$l]}" --list --format terse 2>/dev/null) \
    || { echo "test-parallel: $l --list failed" >&2; exit 1; }
  declare -A seen=()
  while IFS= read -r line; do
    [[ $line == *': test' ]] || continue
    name=${line%: test} module=${line%%::*}
    j="$l::$module"
    if [[ -z ${seen[$module]:-} ]]; then
      seen[$module]=1 split_labels+=("$j") exe_of[$j]=${exe_of[$l]} dir_of[$j]=${dir_of[$l]}
    fi
    names_of[$j]+="$name"$'\n'
  done <<< "$listed"
  unset seen
done
labels=("${split_labels[@]}")

# Doc tests: cargo compiles them itself, a few seconds; run before the binaries.
doc_start=$SECONDS
"$cargo" test "${cargo_args[@]}" --doc -- "${test_args[@]}" > "$logs/doc-tests.log" 2>&1
doc_rc=$?
doc_seconds=$(( SECONDS - doc_start ))
echo; echo "==== doc tests: $( (( doc_rc == 0 )) && echo ok || echo "FAILED (exit $doc_rc)") in ${doc_seconds}s"
cat "$logs/doc-tests.log"

# The order: the last run's seconds, longest first, a binary it did not run
# first (it may be slow); without figures, the fixed list, then the rest.
declare -A last
unknown=999999
if [[ -f $times ]]; then
  while IFS=$'\t' read -r s l; do [[ $s =~ ^[0-9]+$ ]] && last[$l]=$s; done < "$times"
else
  i=${#fallback_order[@]} unknown=0
  for l in "${fallback_order[@]}"; do last[$l]=$(( 100 + i )); i=$(( i - 1 )); done
fi
mapfile -t queue < <(for l in "${labels[@]}"; do printf '%s\t%s\n' "${last[$l]:-$unknown}" "$l"; done | sort -t$'\t' -k1,1nr -k2 | cut -f2)
# The binaries that run alone go last, each once the others have ended.
is_alone() { local a; for a in "${alone[@]}"; do [[ $a == "$1" ]] && return 0; done; return 1; }
shared=() solo=()
for l in "${queue[@]}"; do if is_alone "$l"; then solo+=("$l"); else shared+=("$l"); fi; done
queue=("${shared[@]}" "${solo[@]}")

declare -A pid_label start_of result seconds
running=0
log_of() { local f=${1//\//_}; f=${f//.rs::/_}; echo "$logs/${f%.rs}.log"; }
start() {
  local l=$1 only=()
  [[ -n ${names_of[$l]:-} ]] && { mapfile -t only <<< "${names_of[$l]%$'\n'}"; only=(--exact "${only[@]}"); }
  ( cd "${dir_of[$l]}" && CARGO_MANIFEST_DIR=${dir_of[$l]} CARGO=$cargo_path \
      exec "${exe_of[$l]}" "${test_args[@]}" "${only[@]}" ) > "$(log_of "$l")" 2>&1 < /dev/null &
  pid_label[$!]=$l start_of[$l]=$SECONDS
  running=$(( running + 1 ))
}
# A tick every few minutes says what is still running (a CI log otherwise
# shows nothing while the long binaries run).
tick=120
sleep "$tick" & ticker=$!
stop_all() {
  trap - INT TERM
  kill "$ticker" 2>/dev/null
  for p in "${!pid_label[@]}"; do kill "$p" 2>/dev/null; done
  echo "test-parallel: interrupted" >&2
  exit 130
}
trap stop_all INT TERM

echo; echo "test-parallel: ${#queue[@]} test jobs, $jobs at a time, longest first (target/test-logs/); alone, last: ${solo[*]:-none}"
tests_start=$SECONDS
next=0
while (( next < ${#queue[@]} || running > 0 )); do
  while (( running < jobs && next < ${#queue[@]} )); do
    # One that runs alone starts only when nothing else runs, and then
    # nothing starts beside it.
    if is_alone "${queue[next]}" && (( running > 0 )); then break; fi
    start "${queue[next]}"; next=$(( next + 1 ))
    is_alone "${queue[next-1]}" && break
  done
  wait -n -p done_pid; rc=$?
  if [[ $done_pid == "$ticker" ]]; then
    now=()
    for p in "${!pid_label[@]}"; do now+=("${pid_label[$p]} ($(( SECONDS - start_of[${pid_label[$p]}] ))s)"); done
    echo "test-parallel: $(( SECONDS - tests_start ))s: running ${now[*]}; $(( ${#queue[@]} - next )) waiting"
    sleep "$tick" & ticker=$!
    continue
  fi
  l=${pid_label[$done_pid]}
  unset "pid_label[$done_pid]"
  # A tier's snapshot goes once none of its jobs waits or runs.
  if [[ ${exe_of[$l]} == *.test-parallel ]]; then
    in_use=0
    for p in "${!pid_label[@]}"; do [[ ${exe_of[${pid_label[$p]}]} == "${exe_of[$l]}" ]] && in_use=1; done
    for q in "${queue[@]:next}"; do [[ ${exe_of[$q]} == "${exe_of[$l]}" ]] && in_use=1; done
    (( in_use )) || rm -f "${exe_of[$l]}"
  fi
  running=$(( running - 1 ))
  seconds[$l]=$(( SECONDS - start_of[$l] ))
  if (( rc == 0 )); then result[$l]=ok; elif (( rc > 128 )); then result[$l]="FAILED (signal $(( rc - 128 )))"; else result[$l]="FAILED (exit $rc)"; fi
  echo; echo "==== $l: ${result[$l]} in ${seconds[$l]}s ($(log_of "$l"))"
  cat "$(log_of "$l")"
done
kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null
trap - INT TERM
tests_seconds=$(( SECONDS - tests_start ))

# This run's figures replace the last ones; binaries it did not run keep theirs.
for l in "${labels[@]}"; do last[$l]=${seconds[$l]}; done
for l in "${!last[@]}"; do printf '%s\t%s\n' "${last[$l]}" "$l"; done | sort -t$'\t' -k1,1nr > "$times.new" && mv "$times.new" "$times"

failed=()
(( doc_rc == 0 )) || failed+=("doc tests")
echo
echo "test-parallel: summary ($jobs at a time)"
printf '| %-42s | %-18s | %7s | %s\n' job result seconds tests
printf '|%s|%s|%s|%s\n' "$(printf -- '-%.0s' {1..44})" "$(printf -- '-%.0s' {1..20})" "$(printf -- '-%.0s' {1..9})" "---"
for l in "${queue[@]}"; do
  counts=$(grep -E '^test result: ' "$(log_of "$l")" | tail -1 | sed -E 's/^test result: [A-Za-z]+\. ([0-9]+ passed; [0-9]+ failed).*/\1/')
  printf '| %-42s | %-18s | %7s | %s\n' "$l" "${result[$l]}" "${seconds[$l]}" "$counts"
done | sort -t'|' -k4,4nr
printf '| %-42s | %-18s | %7s |\n' "doc tests" "$( (( doc_rc == 0 )) && echo ok || echo FAILED)" "$doc_seconds"
for l in "${queue[@]}"; do [[ ${result[$l]} == ok ]] || failed+=("$l"); done
total=$(( SECONDS - started )) serial=0
for l in "${queue[@]}"; do serial=$(( serial + seconds[$l] )); done
echo "test-parallel: build ${build_seconds}s, doc tests ${doc_seconds}s, test jobs ${tests_seconds}s ($(( tests_seconds / 60 )) min $(( tests_seconds % 60 )) s, $jobs at a time; their own times add up to ${serial}s), total ${total}s ($(( total / 60 )) min $(( total % 60 )) s)"
if (( ${#failed[@]} )); then
  echo "test-parallel: FAILED: ${failed[*]} (logs in $logs/)" >&2
  exit 1
fi
echo "test-parallel: all ${#queue[@]} test jobs and the doc tests passed"
