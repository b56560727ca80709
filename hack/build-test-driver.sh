#!/usr/bin/env bash
# Builds upstream's DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver,
# Cobra command `cdi-test-driver`) at the control plane's version into a
# versioned cache outside the clone, as one static binary `dra-test-driver`,
# and prints the directory. Nothing is rebuilt when the binary is there.
# `make test-driver` turns it into an image archive and copies the manifests
# next to it (target/dra-test-driver/).
#
#   hack/build-test-driver.sh          the driver as upstream wrote it
#   hack/build-test-driver.sh MUTANT   a mutant: the driver's source with
#       hack/mutants/test-driver/MUTANT.patch applied, built into
#       <cache>/test-driver/kube-$KUBE_VERSION/mutants/MUTANT/ (rebuilt when
#       the patch changes), whose directory it prints (`make test-driver-mutant`)
#
#   DRA_E2E_CACHE_DIR=/some/dir   cache root (default ${XDG_CACHE_HOME:-~/.cache}/dra-e2e)
set -euo pipefail
# Static (no cgo), so the image needs nothing but the binary.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
log_prefix=test-driver
. "$here/lib.sh"

cache=$(cache_root)
out="$cache/test-driver/kube-$KUBE_VERSION"

# A mutant: the driver's package (main and its app subpackage) copied out of
# the module cache into a temporary copy of the build module, the mutant's
# patch applied to it with `patch -p1` (paths a/app/kubeletplugin.go, ...,
# against the pristine source at KUBE_VERSION), its import of the app package
# then pointed at the copy, and built like the driver above. The applied patch
# is kept next to the binary: a changed patch means a rebuild.
build_mutant() {
  local name=$1
  local patch_file="$here/mutants/test-driver/$name.patch"
  if [[ ! "$name" =~ ^[a-z0-9][a-z0-9-]*$ || ! -f "$patch_file" ]]; then
    log "no mutant '$name': hack/mutants/test-driver/ has $(cd "$here/mutants/test-driver" && ls -- *.patch 2>/dev/null | sed 's/\.patch$//' | tr '\n' ' ')"
    exit 2
  fi
  local dest="$out/mutants/$name"
  if [[ -x "$dest/dra-test-driver" ]] && cmp -s "$patch_file" "$dest/applied.patch"; then
    log "mutant $name of dra-test-driver $KUBE_VERSION already built"
    echo "$dest"
    return
  fi

  local upstream_pkg=k8s.io/kubernetes/test/e2e/dra/test-driver
  local src
  src=$(cd "$out/mod" && go list -mod=mod -f '{{.Dir}}' "$upstream_pkg") || {
    log "cannot find $upstream_pkg in the module cache (go list in $out/mod)"; exit 1; }
  local module
  module=$(sed -n 's/^module[[:space:]]*//p' "$out/mod/go.mod")

  mkdir -p "$dest"
  local tmp
  tmp=$(mktemp -d "$dest/build.XXXXXX")
  # Whatever ends the build (an error, Ctrl-C) removes the copy and any
  # half-written file.
  # shellcheck disable=SC2064 # expanded now: tmp and dest are local
  trap "rm -rf '$tmp' '$dest/dra-test-driver.tmp' '$dest/applied.patch.tmp'; rmdir --ignore-fail-on-non-empty '$dest'" EXIT
  trap 'exit 130' INT TERM
  cp "$out/mod/go.mod" "$out/mod/go.sum" "$tmp/"
  mkdir "$tmp/testdriver"
  cp "$src/dra-test-driver.go" "$tmp/testdriver/"
  cp -r "$src/app" "$tmp/testdriver/app"
  chmod -R u+w "$tmp/testdriver"   # the module cache is read-only

  if ! (cd "$tmp/testdriver" && patch -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch -r - <"$patch_file" >"$tmp/patch.log" 2>&1); then
    log "patch hack/mutants/test-driver/$name.patch does not apply to $upstream_pkg at $KUBE_VERSION ($src):"
    sed 's/^/    /' "$tmp/patch.log" >&2
    exit 1
  fi
  local app_import="\"$upstream_pkg/app\""
  if ! grep -q -F "$app_import" "$tmp/testdriver/dra-test-driver.go"; then
    log "$upstream_pkg/dra-test-driver.go no longer imports $upstream_pkg/app: the import rewrite in $0 needs updating"
    exit 1
  fi
  sed -i "s|$app_import|\"$module/testdriver/app\"|" "$tmp"/testdriver/*.go "$tmp"/testdriver/app/*.go

  log "building mutant $name of dra-test-driver $KUBE_VERSION (measured on 2 cores: 2-3 s each once the unmutated driver is built, whose compiled packages it shares through the Go build cache)"
  timed_build "mutant $name" bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/dra-test-driver.tmp" ./testdriver' _ "$tmp" "$(kube_ldflags)" "$dest"
  mv "$dest/dra-test-driver.tmp" "$dest/dra-test-driver"
  cp "$patch_file" "$dest/applied.patch.tmp"
  mv "$dest/applied.patch.tmp" "$dest/applied.patch"
  rm -rf "$tmp"
  trap - EXIT INT TERM
  echo "$dest"
}

# Built in a copy of hack/k8s's module: the driver then links exactly the
# k8s.io versions (and staging replace directives) the control plane and the
# kubelet are built from, and whatever `go` adds to go.mod/go.sum for the
# driver's own imports stays out of the clone (as for e2e.test).
mkdir -p "$out/mod"
# Copied again only when hack/k8s changed: go extends the copy's go.sum.
if ! cmp -s "$here/k8s/go.mod" "$out/mod/go.mod.orig"; then
  cp "$here/k8s/go.mod" "$here/k8s/go.sum" "$out/mod/"
  cp "$here/k8s/go.mod" "$out/mod/go.mod.orig"
fi

if (( $# > 1 )); then
  log "usage: $0 [MUTANT] (one of hack/mutants/test-driver/*.patch, without .patch)"
  exit 2
fi
if (( $# == 1 )); then
  build_mutant "$1"
  exit 0
fi

if [[ -x "$out/dra-test-driver" ]]; then
  log "dra-test-driver $KUBE_VERSION already built"
else
  log "building dra-test-driver $KUBE_VERSION (measured on 2 cores: 8 s after the control plane's build, whose packages it shares through the Go build cache; 6 min with an empty Go build cache)"
  timed_build dra-test-driver bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/dra-test-driver.tmp" k8s.io/kubernetes/test/e2e/dra/test-driver' _ "$out/mod" "$(kube_ldflags)" "$out"
  mv "$out/dra-test-driver.tmp" "$out/dra-test-driver"
fi
echo "$out"
