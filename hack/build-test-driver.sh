#!/usr/bin/env bash
# Builds upstream's DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver,
# Cobra command `cdi-test-driver`) at the control plane's version into a
# versioned cache outside the clone, as one static binary `dra-test-driver`,
# and prints the directory. Nothing is rebuilt when the binary is there.
# `make test-driver` turns it into an image archive and copies the manifests
# next to it (target/dra-test-driver/).
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

if [[ -x "$out/dra-test-driver" ]]; then
  log "dra-test-driver $KUBE_VERSION already built"
else
  log "building dra-test-driver $KUBE_VERSION (measured on 2 cores: 8 s after the control plane's build, whose packages it shares through the Go build cache; 6 min with an empty Go build cache)"
  timed_build dra-test-driver bash -c 'cd "$1" && go build -trimpath -ldflags "$2" -o "$3/dra-test-driver.tmp" k8s.io/kubernetes/test/e2e/dra/test-driver' _ "$out/mod" "$(kube_ldflags)" "$out"
  mv "$out/dra-test-driver.tmp" "$out/dra-test-driver"
fi
echo "$out"
