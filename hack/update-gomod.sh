#!/usr/bin/env bash
# Regenerates the Go wrapper modules in hack/k8s and hack/etcd.
#
# k8s.io/kubernetes pins its staging modules to v0.0.0 and resolves them with
# local replace directives that consumers do not inherit, so the replace list
# is generated from the module's own go.mod (only the Go module proxy is used).
set -euo pipefail
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"

staging=v0.${KUBE_VERSION#v1.}
cd "$here/k8s"
rm -f go.mod go.sum
go mod init dra-e2e/hack/k8s >/dev/null 2>&1
go mod edit -go=1.26.0
gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' "$gomod"); do
  go mod edit -replace="$m=$m@$staging"
done
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" \
  "k8s.io/kubernetes/cmd/kube-scheduler@$KUBE_VERSION" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION"
go mod tidy

cd "$here/etcd"
rm -f go.mod go.sum
go mod init dra-e2e/hack/etcd >/dev/null 2>&1
go mod edit -go=1.26.0
go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
go mod tidy
