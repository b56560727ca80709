#!/usr/bin/env bash
# Runs upstream's own end-to-end tests (k8s.io/kubernetes/test/e2e, at the
# control plane's version) against `dra-e2e cluster up --node-kind real`: the
# check that real local nodes look like standard nodes to a driver. Needs
# root (real nodes), Go, and cargo unless DRA_E2E is given.
#
# The test binary is upstream's e2e.test cut to its [DRA] specs
# (hack/upstream-dra: test/e2e/dra and apimachinery's ResourceQuota spec, the
# same suite set-up and flags): the whole e2e.test links every e2e area and
# takes about 25 minutes to compile on two cores; this one about 2 minutes
# after the control plane's build. UPSTREAM_SUITE=full builds and runs the
# whole e2e.test instead, for a focus outside [DRA].
#
#   hack/upstream-e2e.sh build   only build the test binary and ginkgo into the cache (prints the dir)
#   hack/upstream-e2e.sh run     build, start the cluster, run, print the pass/fail counts (default)
#
#   UPSTREAM_FOCUS=REGEX    ginkgo focus (default '\[DRA\]')
#   UPSTREAM_SKIP=REGEX     ginkgo skip (default: specs that need what a local
#                           cluster has not: see default_skip below)
#   UPSTREAM_LABELS=EXPR    ginkgo label filter (default '!Feature:OffByDefault': the cluster
#                           runs with default feature gates; empty for none)
#   UPSTREAM_PROCS=N        parallel ginkgo processes (default 4)
#   UPSTREAM_NODES=N        real nodes (default 2)
#   UPSTREAM_REPORT_DIR=DIR JUnit report and logs (default target/upstream-e2e)
#   UPSTREAM_SUITE=dra|full the [DRA] cut (default) or the whole e2e.test
#   DRA_E2E=PATH            the dra-e2e binary (default: cargo build, target/debug/dra-e2e)
#   DRA_E2E_CACHE_DIR       cache root, as for the other build scripts
#   DRA_E2E_BINARIES_DIR, DRA_E2E_NODE_BINARIES_DIR  as for the runner
#
# Exit status: 0 when every spec that ran passed, 1 otherwise.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/versions.env"
log_prefix=upstream-e2e
. "$here/lib.sh"

cache=$(cache_root)
out="$cache/upstream-e2e/kube-$KUBE_VERSION"
suite=${UPSTREAM_SUITE:-dra}
case "$suite" in
  dra) binary=dra.test package=./upstreamdra estimate="about 2 min after the control plane's build, 10 with a cold Go cache" ;;
  full) binary=e2e.test package=k8s.io/kubernetes/test/e2e estimate="about 25 min on 2 cores with a cold Go cache, less after the control plane" ;;
  *) echo "upstream-e2e: UPSTREAM_SUITE=$suite: expected dra or full" >&2; exit 2 ;;
esac

# Specs a local cluster cannot run whatever its nodes: they restart or
# reconfigure components over SSH or through a cloud, or are marked flaky.
default_skip='\[Disruptive\]|\[Flaky\]'

# The test binary and the ginkgo CLI (for parallel processes) are built in a
# copy of hack/k8s's module, so they use exactly the versions (and staging
# replace directives) the control plane is built from, and whatever `go` adds
# to go.mod/go.sum for the test's own imports stays out of the clone. Each is
# built under a temporary name and renamed when complete; the [DRA] cut is
# rebuilt when its source changed.
build() {
  mkdir -p "$out/mod"
  # Copied again only when hack/k8s changed: go extends the copy's go.sum.
  if ! cmp -s "$here/k8s/go.mod" "$out/mod/go.mod.orig"; then
    cp "$here/k8s/go.mod" "$here/k8s/go.sum" "$out/mod/"
    cp "$here/k8s/go.mod" "$out/mod/go.mod.orig"
  fi
  mkdir -p "$out/mod/upstreamdra"
  if ! cmp -s "$here/upstream-dra/dra_test.go" "$out/mod/upstreamdra/dra_test.go"; then
    cp "$here/upstream-dra/dra_test.go" "$out/mod/upstreamdra/dra_test.go"
    rm -f "$out/dra.test"
  fi
  if [[ -x "$out/$binary" ]]; then
    log "$binary $KUBE_VERSION already built"
  else
    log "building $binary $KUBE_VERSION ($estimate)"
    timed_build "$binary" bash -c 'cd "$1" && go test -c -trimpath -ldflags "$2" -o "$3/$4.tmp" "$5"' _ "$out/mod" "$(kube_ldflags)" "$out" "$binary" "$package"
    mv "$out/$binary.tmp" "$out/$binary"
  fi
  if [[ -x "$out/ginkgo" ]]; then
    log "ginkgo already built"
  else
    log "building the ginkgo CLI (seconds)"
    timed_build ginkgo bash -c 'cd "$1" && go build -trimpath -ldflags "-s -w" -o "$2/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo' _ "$out/mod" "$out"
    mv "$out/ginkgo.tmp" "$out/ginkgo"
  fi
  echo "$out"
}

cluster_pid= cluster_log=
cleanup() {
  if [[ -n "$cluster_pid" ]] && kill -0 "$cluster_pid" 2>/dev/null; then
    log "stopping the cluster"
    # TERM, not INT: a background job of a script starts with SIGINT
    # ignored, so an INT sent before cluster up installs its handlers is lost
    # and the cluster comes up with nobody to stop it.
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
    if grep -q "left behind" "$cluster_log"; then
      grep "left behind" "$cluster_log" >&2
      echo "upstream-e2e: the cluster left something behind (see $cluster_log)" >&2
      exit 1
    fi
  fi
}

run() {
  [[ $(id -u) == 0 ]] || { echo "upstream-e2e: real nodes need root" >&2; exit 1; }
  build >/dev/null
  local focus=${UPSTREAM_FOCUS:-'\[DRA\]'}
  local skip=${UPSTREAM_SKIP-$default_skip}
  local labels=${UPSTREAM_LABELS-'!Feature:OffByDefault'}
  local procs=${UPSTREAM_PROCS:-4}
  local nodes=${UPSTREAM_NODES:-2}
  local report
  report=$(mkdir -p "${UPSTREAM_REPORT_DIR:-$root/target/upstream-e2e}" && cd "${UPSTREAM_REPORT_DIR:-$root/target/upstream-e2e}" && pwd)
  rm -f "$report"/junit*.xml

  local bin=${DRA_E2E:-}
  if [[ -z "$bin" ]]; then
    log "building the runner"
    (cd "$root" && cargo build --quiet)
    bin="${CARGO_TARGET_DIR:-$root/target}/debug/dra-e2e"
  fi
  [[ -x "$bin" ]] || { echo "upstream-e2e: DRA_E2E=$bin is not an executable" >&2; exit 1; }
  DRA_E2E_BINARIES_DIR=$("$here/build-controlplane.sh")
  DRA_E2E_NODE_BINARIES_DIR=$("$here/build-node.sh")
  export DRA_E2E_BINARIES_DIR DRA_E2E_NODE_BINARIES_DIR

  cluster_log="$report/cluster.log"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  log "starting the local cluster with $nodes real nodes (log: $cluster_log)"
  # Made before the start: the loop below may read it before the
  # background job has opened it.
  : >"$cluster_log"
  "$bin" cluster up --node-kind real --nodes "$nodes" >"$cluster_log" 2>&1 &
  cluster_pid=$!
  local kubeconfig="" deadline=$((SECONDS + 300))
  # The cluster prints its kubeconfig once every node is Ready; a log line
  # is all another process can watch for.
  while [[ -z "$kubeconfig" ]]; do
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$cluster_log" >&2; echo "upstream-e2e: the cluster did not start" >&2; exit 1; }
    (( SECONDS < deadline )) || { cat "$cluster_log" >&2; echo "upstream-e2e: the cluster was not up within 300 s" >&2; exit 1; }
    kubeconfig=$(sed -n 's/^  kubeconfig: //p' "$cluster_log")
    [[ -n "$kubeconfig" ]] || sleep 1
  done
  log "cluster up, kubeconfig $kubeconfig"

  local args=(
    --kubeconfig="$kubeconfig"
    --report-dir="$report"
    --ginkgo.focus="$focus"
    --ginkgo.timeout=3h
    --ginkgo.no-color
  )
  [[ -n "$skip" ]] && args+=(--ginkgo.skip="$skip")
  [[ -n "$labels" ]] && args+=(--ginkgo.label-filter="$labels")
  local e2e_log="$report/e2e.log" start=$SECONDS rc=0
  log "running $binary (focus $focus${skip:+, skip $skip}${labels:+, labels $labels}) with $procs processes (log: $e2e_log)"
  "$out/ginkgo" --no-color --procs="$procs" --timeout=3h "$out/$binary" -- "${args[@]}" >"$e2e_log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  # Ginkgo's summary: "Ran 104 of 7000 Specs in 808.1 seconds" and
  # "SUCCESS! -- 104 Passed | 0 Failed | 0 Pending | 6896 Skipped".
  # Colour codes stripped, should a terminal setting have let them through.
  local ran counts plain
  plain=$(sed 's/\x1b\[[0-9;]*m//g' "$e2e_log")
  ran=$(grep -E '^Ran [0-9]+ of [0-9]+ Specs' <<<"$plain" | tail -1 || true)
  counts=$(grep -E '(SUCCESS|FAIL)! .*Passed' <<<"$plain" | tail -1 || true)
  if [[ -z "$ran" || -z "$counts" ]]; then
    tail -50 "$e2e_log" >&2
    echo "upstream-e2e: no ginkgo summary in $e2e_log (exit status $rc)" >&2
    exit 1
  fi
  grep -E '^\s*\[FAIL\]' <<<"$plain" | sort -u >&2 || true
  echo "upstream $binary $KUBE_VERSION on $nodes real nodes: $ran; $counts (wall ${took}s, $procs processes)"
  echo "  focus: $focus${skip:+  skip: $skip}${labels:+  labels: $labels}"
  echo "  log: $e2e_log  junit: $report/junit_01.xml"
  return "$rc"
}

case "${1:-run}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 [build|run]" >&2; exit 2 ;;
esac
