#!/usr/bin/env bash
# Builds upstream's hostpathplugin (github.com/kubernetes-csi/csi-driver-host-path,
# ./cmd/hostpathplugin), the program of the image upstream's DRA e2e suite
# runs its kubelet-plugin proxy pods from (`hostpathplugin --v=5
# --endpoint=<socket> --proxy-endpoint=tcp://:<port>`), at that image's
# version, into a versioned cache outside the clone, as one static binary
# `hostpathplugin`, and prints the directory. Nothing is rebuilt when the
# binary is there. `make hostpathplugin` turns it into the image archive
# target/hostpathplugin/hostpathplugin.oci.tar.
#
# The source is the module from the Go module proxy, or a checkout:
#   HOSTPATHPLUGIN_SRC=/path/to/csi-driver-host-path   a checkout at
#       HOSTPATHPLUGIN_VERSION (its vendor/ is used when it has one)
#   DRA_E2E_CACHE_DIR=/some/dir   cache root (default ${XDG_CACHE_HOME:-~/.cache}/dra-e2e)
#
# Where the module proxy refuses the module (as the Go module proxy does from
# this project's machines: 403 "This module version is not available" for
# every version) and no checkout is given, it says so and exits 1.
set -euo pipefail
# Static (no cgo): the image holds the program and busybox, no libc.
export GOTOOLCHAIN=local CGO_ENABLED=0
here=$(cd "$(dirname "$0")" && pwd)
log_prefix=hostpathplugin
. "$here/lib.sh"

# The version upstream's DRA suite (Kubernetes v1.37) pins in its proxy
# pod manifest; crates/cluster's HOSTPATHPLUGIN_IMAGE names the same.
HOSTPATHPLUGIN_VERSION=v1.17.1
module=github.com/kubernetes-csi/csi-driver-host-path
out="$(cache_root)/hostpathplugin/$HOSTPATHPLUGIN_VERSION"

if [[ -x "$out/hostpathplugin" ]]; then
  log "hostpathplugin $HOSTPATHPLUGIN_VERSION already built"
  echo "$out"
  exit 0
fi

if [[ -n "${HOSTPATHPLUGIN_SRC:-}" ]]; then
  [[ -f "$HOSTPATHPLUGIN_SRC/go.mod" ]] && grep -q "^module $module\$" "$HOSTPATHPLUGIN_SRC/go.mod" || {
    log "HOSTPATHPLUGIN_SRC=$HOSTPATHPLUGIN_SRC is not a checkout of $module (no go.mod naming it)"; exit 1; }
  src=$HOSTPATHPLUGIN_SRC
  log "building from the checkout $src (expected at $HOSTPATHPLUGIN_VERSION; not checked)"
else
  # The module is a main module of its own, with replace directives, so
  # `go install pkg@version` refuses it: it is downloaded and built in place.
  if ! info=$(go mod download -json "$module@$HOSTPATHPLUGIN_VERSION" 2>&1); then
    reason=$(sed -n 's/.*"Error": "\(.*\)",*$/\1/p' <<<"$info")
    log "the Go module proxy ($(go env GOPROXY)) does not serve $module@$HOSTPATHPLUGIN_VERSION: ${reason:-$info}"
    log "give a checkout of it at $HOSTPATHPLUGIN_VERSION with HOSTPATHPLUGIN_SRC=DIR, or run where the module can be downloaded"
    exit 1
  fi
  src=$(sed -n 's/.*"Dir": "\(.*\)",*$/\1/p' <<<"$info")
  [[ -d "$src" ]] || { log "go mod download gave no directory for $module@$HOSTPATHPLUGIN_VERSION: $info"; exit 1; }
fi

# Built in a copy: the module cache is read-only and a checkout stays as it
# was (go may add to go.sum). A build cut short leaves no binary behind.
mkdir -p "$out"
tmp=$(mktemp -d "$out/build.XXXXXX")
# shellcheck disable=SC2064 # expanded now
trap "rm -rf '$tmp'" EXIT
trap 'exit 130' INT TERM
cp -r "$src/." "$tmp/src"
chmod -R u+w "$tmp/src"
mod_flag=-mod=mod
[[ -f "$tmp/src/vendor/modules.txt" ]] && mod_flag=-mod=vendor
# main.version is what hostpathplugin prints at its start, as upstream's
# release build (release-tools' build.make) stamps it.
timed_build hostpathplugin bash -c 'cd "$1" && go build "$2" -trimpath -ldflags "-s -w -X main.version=$3" -o "$4/hostpathplugin" ./cmd/hostpathplugin' \
  _ "$tmp/src" "$mod_flag" "$HOSTPATHPLUGIN_VERSION" "$tmp"
mv "$tmp/hostpathplugin" "$out/hostpathplugin"
echo "$out"
