#!/usr/bin/env bash
# The conformance pack inside the cluster under test, as a Job (dra-e2e
# job), as CI runs it: the runner's own image (dra-e2e image runner) and
# upstream's test driver's are imported into the two real nodes of
# `dra-e2e cluster up` (the stand-in for kind), the driver is installed from
# its manifests with kubectl as a cluster admin would, then KEP-5970's seven
# behaviours run in the Job's pod and their results come back through the
# API server into target/job-check/. Needs root (real nodes), kubectl,
# `make controlplane node test-driver` first. Prints `job-check: passed: ...`
# last, or `job-check: FAILED: ...`.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "job-check: FAILED: needs root (real nodes)" >&2; exit 1; }
[[ -f target/dra-test-driver/dra-test-driver.oci.tar ]] || {
  echo "job-check: FAILED: needs upstream's test driver: run make test-driver first" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "job-check: FAILED: needs kubectl (to install the test driver)" >&2; exit 1; }
export DRA_E2E_BINARIES_DIR=${DRA_E2E_BINARIES_DIR:-$(hack/build-controlplane.sh)}
start=$SECONDS
work=$(mktemp -d /tmp/dra-e2e-job-check.XXXXXX)
out=target/job-check
cluster=
stop_cluster() {
  if [[ -n $cluster ]] && kill -0 "$cluster" 2>/dev/null; then
    # TERM: a background job starts with SIGINT ignored (see upstream-e2e.sh).
    kill -TERM "$cluster"
    wait "$cluster" || echo "job-check: cluster up exited with $?; its log: $work/up.log" >&2
  fi
  cluster=
}
trap 'stop_cluster; rm -rf "$work"' EXIT

# Copies: a rebuild of target/ during the check does not change them. The
# runner finds the nodes' agent beside it.
cargo build --quiet --bin dra-e2e --bin dra-e2e-agent
cp target/debug/dra-e2e target/debug/dra-e2e-agent "$work/"
"$work/dra-e2e" image runner --out "$work/runner.oci.tar"

# Made before the start: the loop below may read it first.
: >"$work/up.log"
"$work/dra-e2e" cluster up --node-kind real --nodes 2 \
  --image-archive target/dra-test-driver/dra-test-driver.oci.tar \
  --image-archive "$work/runner.oci.tar" >"$work/up.log" 2>&1 &
cluster=$!
kubeconfig=
for _ in $(seq 300); do
  kubeconfig=$(sed -n 's/^ *kubeconfig: *//p' "$work/up.log")
  [[ -n $kubeconfig ]] && break
  kill -0 "$cluster" 2>/dev/null || break
  sleep 1
done
[[ -n $kubeconfig ]] || { cat "$work/up.log" >&2; echo "job-check: FAILED: cluster up printed no kubeconfig" >&2; exit 1; }
echo "job-check: cluster up (kubeconfig $kubeconfig)"
kubectl --kubeconfig "$kubeconfig" create \
  -f deploy/dra-test-driver/rbac.yaml \
  -f deploy/dra-test-driver/deviceclass.yaml \
  -f deploy/dra-test-driver/kubelet-plugin.yaml >/dev/null

seven='the kubelet registers the driver'"'"'s plugin|the driver publishes ResourceSlices with devices|a claim for the driver'"'"'s class is allocated|the driver prepares the claim of a pod|the pod runs with access to its device|the driver unprepares when the pod is deleted|a device is used again after its pod is gone'
rm -rf "$out"
status=0
"$work/dra-e2e" job --kubeconfig "$kubeconfig" \
  --driver-name test-driver.cdi.k8s.io --device-class test-driver.cdi.k8s.io \
  --name "^($seven)\$" --timeout 10m --out "$out" || status=$?

left=$(kubectl --kubeconfig "$kubeconfig" get namespaces,clusterrolebindings \
  -l dra-e2e.k8s.io/job -o name)
stop_cluster
cases=$(grep -c '<testcase' "$out/junit.xml" 2>/dev/null || true)
failures=$(grep -c '<failure' "$out/junit.xml" 2>/dev/null || true)
if [[ $status != 0 || ${cases:-0} != 7 || ${failures:-0} != 0 || -n $left || ! -f $out/report.html ]]; then
  echo "job-check: FAILED: exit status $status, ${cases:-0} testcases, ${failures:-0} failures, left in the cluster: ${left:-nothing}; results in $out" >&2
  exit 1
fi
echo "job-check: passed: 7 testcases, 0 failures, nothing left in the cluster, results in $out ($((SECONDS - start)) s)"
