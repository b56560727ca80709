#!/usr/bin/env bash
# Builds the project's rolling-update DRA driver (hack/rolling-driver/main.go,
# a kubelet plugin on k8s.io/dynamic-resource-allocation's kubeletplugin
# helper started with RollingUpdate) at the control plane's version into a
# versioned cache outside the clone, as one static binary `rolling-driver`,
# and prints the directory. Nothing is rebuilt while the binary is there and
# was built from the current main.go and hack/k8s/go.mod.
# `make rolling-driver` turns it into an image archive and copies the
# manifests next to it (target/rolling-driver/).
#
#   DRA_E2E_CACHE_DIR=/some/dir   cache root (default ${XDG_CACHE_HOME:-~/.cache}/dra-e2e)
set -euo pipefail
# Static (no cgo), so the image needs nothing but the binary.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
log_prefix=rolling-driver
. "$here/lib.sh"

cache=$(cache_root)
out="$cache/rolling-driver/kube-$KUBE_VERSION"
src="$here/rolling-driver/main.go"

# Built in a copy of hack/k8s's module, with main.go in a package directory
# of its own inside it: the driver then links exactly the k8s.io versions
# (and staging replace directives) the control plane and the kubelet are
# built from, and whatever `go` adds to go.mod/go.sum for the driver's
# imports stays out of the clone.
mkdir -p "$out/mod/rolling-driver"
# Copied again only when hack/k8s changed (go extends the copy's go.sum);
# the binary was linked against the old one, so it goes too.
if ! cmp -s "$here/k8s/go.mod" "$out/mod/go.mod.orig"; then
  cp "$here/k8s/go.mod" "$here/k8s/go.sum" "$out/mod/"
  cp "$here/k8s/go.mod" "$out/mod/go.mod.orig"
  rm -f "$out/rolling-driver" "$out/rolling-driver.main.go"
fi

# The source the binary was built from lies beside it: a changed main.go
# means a new build, an unchanged one none.
if [[ -x "$out/rolling-driver" ]] && cmp -s "$src" "$out/rolling-driver.main.go"; then
  log "rolling-driver $KUBE_VERSION already built"
else
  cp "$src" "$out/mod/rolling-driver/main.go"
  log "building rolling-driver $KUBE_VERSION (measured on 2 cores: 2 s after the control plane and test driver builds, whose packages it shares through the Go build cache; minutes with an empty one)"
  timed_build rolling-driver bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/rolling-driver.tmp" ./rolling-driver' _ "$out/mod" "$(kube_ldflags)" "$out"
  mv "$out/rolling-driver.tmp" "$out/rolling-driver"
  # Written last: a build cut short leaves no stamp, so the next run builds.
  cp "$src" "$out/rolling-driver.main.go"
fi
echo "$out"
