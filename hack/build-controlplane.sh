#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager from
# the Go module proxy into a versioned cache outside the clone, and prints the
# directory. Binaries already present are not rebuilt.
#
#   DRA_E2E_BINARIES_DIR=/some/dir  use that directory instead (nothing is built;
#                                   it must hold all four binaries)
#   DRA_E2E_CACHE_DIR=/some/dir     cache root (default ${XDG_CACHE_HOME:-~/.cache}/dra-e2e)
#   DRA_E2E_KUBE_VERSION=v1.35.4    build that Kubernetes version instead of the pinned one
#                                   (the runner's --kube-version), from a module made in the cache
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
pinned_kube=$KUBE_VERSION
KUBE_VERSION=${DRA_E2E_KUBE_VERSION:-$KUBE_VERSION}
bins=(etcd kube-apiserver kube-scheduler kube-controller-manager)

if [[ -n "${DRA_E2E_BINARIES_DIR:-}" ]]; then
  for b in "${bins[@]}"; do
    [[ -x "$DRA_E2E_BINARIES_DIR/$b" ]] || {
      echo "DRA_E2E_BINARIES_DIR=$DRA_E2E_BINARIES_DIR has no executable $b" >&2; exit 1; }
  done
  echo "$DRA_E2E_BINARIES_DIR"; exit 0
fi

log_prefix=controlplane
. "$here/lib.sh"
cache=$(cache_root)
out="$cache/controlplane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$out"
# Two builds into one directory (two checkouts, a test beside a make target)
# would write the same files at once: the second waits for the first.
exec 9>"$out/.build.lock"
flock -n 9 || { log "another build of $out is running; waiting for it"; flock 9; }
total_start=$SECONDS
ldf=$(kube_ldflags)
module=$(kube_module "$KUBE_VERSION" "$pinned_kube")

if [[ -x "$out/etcd" ]]; then
  log "etcd $ETCD_VERSION already built"
else
  log "building etcd $ETCD_VERSION (about 1.5 min on 2 cores with a cold build cache)"
  timed_build etcd bash -c 'cd "$1/etcd" && go build -trimpath -ldflags "-s -w" -o "$2/etcd.tmp" go.etcd.io/etcd/server/v3' _ "$here" "$out"
  mv "$out/etcd.tmp" "$out/etcd"
fi

for b in kube-apiserver kube-scheduler kube-controller-manager; do
  if [[ -x "$out/$b" ]]; then
    log "$b $KUBE_VERSION already built"
    continue
  fi
  log "building $b $KUBE_VERSION (the first of the three takes about 13 min on 2 cores, the others about 2-3 min each, reusing its cache)"
  timed_build "$b" bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/$4.tmp" "k8s.io/kubernetes/cmd/$4"' _ "$module" "$ldf" "$out" "$b"
  mv "$out/$b.tmp" "$out/$b"
done
log "done in $(( SECONDS - total_start ))s: $out"
echo "$out"
