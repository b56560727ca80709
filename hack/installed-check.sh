#!/usr/bin/env bash
# The runner as a driver author installs and runs it: `cargo install` of the
# runner's package (a debug build sharing this checkout's target directory,
# so it costs a copy; INSTALL_FROM=git installs from a file:// clone of this
# checkout instead, a whole build), then, from a directory holding only a
# profile and the files it names, with this checkout out of reach (a mount
# namespace hides it under an empty tmpfs) and no cargo on PATH, KEP-5970's
# seven behaviours against upstream's test driver on two real local nodes,
# then against a kubeconfig cluster (`dra-e2e cluster up`, kind's stand-in)
# where the driver was installed with kubectl, named by KEP-5970's flags.
# The runner carries its scenarios and build scripts and finds the agent
# that `cargo install` put beside it; the control plane and the nodes'
# programs come from the dra-e2e cache as on any machine where they were
# built once. Needs root (mount namespace, real nodes) and
# `make test-driver` first.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
[[ $(id -u) == 0 ]] || { echo "installed-check needs root (mount namespace, real nodes)" >&2; exit 1; }
[[ -f target/dra-test-driver/kubelet-plugin.yaml ]] || {
  echo "installed-check needs upstream's test driver: run make test-driver first" >&2; exit 1; }
cache=${DRA_E2E_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-e2e}
work=$(mktemp -d /tmp/dra-e2e-installed.XXXXXX)
trap 'rm -rf "$work"' EXIT

case ${INSTALL_FROM:-path} in
  path) from=(--path .) ;;
  git) from=(--git "file://$top" dra-e2e) ;;
  *) echo "INSTALL_FROM=${INSTALL_FROM}: want path or git" >&2; exit 1 ;;
esac
echo "installed-check: cargo install --debug --locked ${from[*]} --root $work/install"
cargo install --quiet --debug --locked "${from[@]}" --root "$work/install" --target-dir target
ls "$work/install/bin"

# A driver's repository: the profile and what it names, nothing else.
mkdir -p "$work/repo/profiles" "$work/repo/target" "$work/cache"
cp profiles/dra-test-driver.yaml "$work/repo/profiles/"
cp -r target/dra-test-driver "$work/repo/target/"

seven='the kubelet registers the driver'"'"'s plugin|the driver publishes ResourceSlices with devices|a claim for the driver'"'"'s class is allocated|the driver prepares the claim of a pod|the pod runs with access to its device|the driver unprepares when the pod is deleted|a device is used again after its pod is gone'

# shellcheck disable=SC2016
unshare --mount --propagation private env top="$top" work="$work" cache="$cache" seven="$seven" bash -c '
  set -euo pipefail
  mount --bind "$cache" "$work/cache"
  mount -t tmpfs -o size=1m,mode=0755 dra-e2e-checkout-hidden "$top"
  [[ ! -e $top/Cargo.toml ]] || { echo "installed-check: the checkout is still in reach" >&2; exit 1; }
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  if command -v cargo >/dev/null; then echo "installed-check: cargo is on PATH ($(command -v cargo))" >&2; exit 1; fi
  echo "installed-check: checkout hidden, no cargo on PATH; in $work/repo: $(ls -R "$work/repo" | tr "\n" " ")"
  cd "$work/repo"
  DRA_E2E_CACHE_DIR="$work/cache" "$work/install/bin/dra-e2e" --cluster local --node-kind real --nodes 2 \
    --profile profiles/dra-test-driver.yaml --name "^($seven)\$" --junit "$work/junit.xml"

  # The same seven against a kubeconfig cluster with the driver installed by
  # an admin, KEP-5970'"'"'s two flags and no profile: `dra-e2e cluster up`
  # with two real nodes is the stand-in for kind here.
  : >"$work/up.log"
  DRA_E2E_CACHE_DIR="$work/cache" "$work/install/bin/dra-e2e" cluster up --node-kind real --nodes 2 \
    --image-archive target/dra-test-driver/dra-test-driver.oci.tar >"$work/up.log" 2>&1 &
  up=$!
  # TERM: a background job starts with SIGINT ignored (see upstream-e2e.sh).
  trap "kill -TERM $up 2>/dev/null; wait $up" EXIT
  kubeconfig=
  # cluster up prints its kubeconfig line once the cluster is ready (as
  # make job-check reads it).
  for _ in $(seq 300); do
    kubeconfig=$(sed -n "s/^ *kubeconfig: *//p" "$work/up.log")
    [[ -n $kubeconfig ]] && break
    kill -0 $up 2>/dev/null || break
    sleep 1
  done
  [[ -n $kubeconfig ]] || { cat "$work/up.log" >&2; echo "installed-check: cluster up printed no kubeconfig" >&2; exit 1; }
  echo "installed-check: kubeconfig cluster up ($kubeconfig); installing the test driver as an admin would"
  kubectl --kubeconfig "$kubeconfig" create -f target/dra-test-driver/rbac.yaml \
    -f target/dra-test-driver/deviceclass.yaml -f target/dra-test-driver/kubelet-plugin.yaml >/dev/null
  DRA_E2E_CACHE_DIR="$work/cache" "$work/install/bin/dra-e2e" --cluster kubeconfig --kubeconfig "$kubeconfig" \
    --driver-name test-driver.cdi.k8s.io --device-class test-driver.cdi.k8s.io \
    --name "^($seven)\$" --junit "$work/junit-kubeconfig.xml"
  echo "installed-check: the kubeconfig run passed"
'
