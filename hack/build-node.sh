#!/usr/bin/env bash
# Builds what a real kubelet node needs into a versioned cache outside the
# clone, installs the Debian packages it needs when missing, and prints the
# directory. Parts already built are not rebuilt.
#
#   kubelet                       k8s.io/kubernetes/cmd/kubelet (hack/k8s, shares the control plane's Go cache)
#   sampledeviceplugin            k8s.io/kubernetes/test/images/sample-device-plugin (the image of upstream's
#                                 device-plugin scenarios; the runner writes it into every real node)
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2 (hack/containerd)
#   runc, CNI plugins, busybox-static, iptables  Debian packages
#
#   DRA_E2E_NODE_BINARIES_DIR=/some/dir  use that directory instead (nothing is built)
#   DRA_E2E_CACHE_DIR=/some/dir          cache root (default ${XDG_CACHE_HOME:-~/.cache}/dra-e2e)
#   DRA_E2E_NO_APT=1                     never install packages; say which are missing instead
#   DRA_E2E_KUBELET_VERSION=v1.36.3      build that kubelet (and sample device plugin) instead of the
#                                        pinned KUBE_VERSION (the runner's --kubelet-version), from a
#                                        module made in the cache; containerd stays pinned
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
pinned_kube=$KUBE_VERSION
KUBE_VERSION=${DRA_E2E_KUBELET_VERSION:-$KUBE_VERSION}
log_prefix=node
. "$here/lib.sh"
bins=(kubelet containerd containerd-shim-runc-v2 ctr)

if [[ -n "${DRA_E2E_NODE_BINARIES_DIR:-}" ]]; then
  for b in "${bins[@]}"; do
    [[ -x "$DRA_E2E_NODE_BINARIES_DIR/$b" ]] || {
      echo "DRA_E2E_NODE_BINARIES_DIR=$DRA_E2E_NODE_BINARIES_DIR has no executable $b" >&2; exit 1; }
  done
  echo "$DRA_E2E_NODE_BINARIES_DIR"; exit 0
fi

# Debian packages: the program each provides, so a present program is enough.
declare -A packages=(
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [busybox-static]=/bin/busybox
  [iptables]=/usr/sbin/iptables
)
missing=()
for p in "${!packages[@]}"; do
  [[ -x "${packages[$p]}" ]] || missing+=("$p")
done
if (( ${#missing[@]} > 0 )); then
  if [[ -n "${DRA_E2E_NO_APT:-}" || $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "real nodes need the Debian packages ${missing[*]}: install them with apt-get install ${missing[*]}" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
    log "apt-get install failed; trying once more after apt-get update"
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
  }
fi

cache=$(cache_root)
out="$cache/node/kube-$KUBE_VERSION-containerd-$CONTAINERD_VERSION"
mkdir -p "$out"
# Two builds into one directory (two checkouts, a test beside a make target)
# would write the same files at once: the second waits for the first.
exec 9>"$out/.build.lock"
flock -n 9 || { log "another build of $out is running; waiting for it"; flock 9; }
total_start=$SECONDS
module=$(kube_module "$KUBE_VERSION" "$pinned_kube")

# Each binary is written under a temporary name and renamed when complete, so
# an interrupted build never leaves a file a later run would trust.
if [[ -x "$out/kubelet" ]]; then
  log "kubelet $KUBE_VERSION already built"
else
  log "building kubelet $KUBE_VERSION (about 3 min on 2 cores when the control plane's Go cache is warm)"
  timed_build kubelet bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet' _ "$module" "$(kube_ldflags)" "$out"
  mv "$out/kubelet.tmp" "$out/kubelet"
fi

if [[ -x "$out/sampledeviceplugin" ]]; then
  log "sampledeviceplugin $KUBE_VERSION already built"
else
  log "building sampledeviceplugin $KUBE_VERSION (seconds after kubelet)"
  timed_build sampledeviceplugin bash -c 'cd "$1" && go build -trimpath -ldflags "-s -w" -o "$2/sampledeviceplugin.tmp" k8s.io/kubernetes/test/images/sample-device-plugin' _ "$module" "$out"
  mv "$out/sampledeviceplugin.tmp" "$out/sampledeviceplugin"
fi

cd_ldf="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
for b in containerd containerd-shim-runc-v2 ctr; do
  if [[ -x "$out/$b" ]]; then
    log "$b $CONTAINERD_VERSION already built"
    continue
  fi
  log "building $b $CONTAINERD_VERSION (containerd about 3 min on 2 cores with a cold cache, the others less)"
  timed_build "$b" bash -c 'cd "$1/containerd" && go build -trimpath -tags "urfave_cli_no_docs no_btrfs osusergo netgo static_build" -ldflags "$2" -o "$3/$4.tmp" "github.com/containerd/containerd/v2/cmd/$4"' _ "$here" "$cd_ldf" "$out" "$b"
  mv "$out/$b.tmp" "$out/$b"
done
log "done in $(( SECONDS - total_start ))s: $out"
echo "$out"
