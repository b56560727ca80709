# Shared by the build scripts: logging and a go build with a heartbeat.
# Callers set `log_prefix` before sourcing.

log() { echo "[${log_prefix:-build} $(date +%H:%M:%S)] $*" >&2; }

# Runs a build with a heartbeat on stderr, so a CI log shows a long compile is
# alive, and reports how long it took. stdout stays free for the caller.
timed_build() {
  local what=$1; shift
  local start=$SECONDS
  # The trap ends the pending sleep too, so no stray process outlives the build.
  ( trap 'kill $nap 2>/dev/null; exit 0' TERM
    while :; do sleep 60 & nap=$!; wait $nap; log "  still building $what ($(( (SECONDS - start) / 60 )) min so far)"; done ) &
  local beat=$!
  local rc=0
  "$@" >&2 || rc=$?
  kill "$beat" 2>/dev/null; wait "$beat" 2>/dev/null || true
  if (( rc != 0 )); then log "building $what failed after $(( SECONDS - start ))s"; return "$rc"; fi
  log "built $what in $(( SECONDS - start ))s"
}

# -ldflags that stamp the Kubernetes version into k8s.io binaries.
kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldf+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z -X $pkg.gitCommit=0000000000000000000000000000000000000000"
  done
  echo "$ldf"
}

cache_root() { echo "${DRA_E2E_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-e2e}"; }

# The Go module a Kubernetes build runs in, printed. The pinned KUBE_VERSION
# uses the checked-in hack/k8s; another version (--kube-version,
# --kubelet-version) gets a module generated into the cache the way
# hack/update-gomod.sh makes hack/k8s: k8s.io/kubernetes pins its staging
# modules to v0.0.0 behind local replaces consumers do not inherit, so the
# replaces are rebuilt from that version's own go.mod, through the module
# proxy only. Made under a temporary name and renamed, so a half-made module is
# never reused.
kube_module() {
  local version=$1 pinned=$2
  if [[ "$version" == "$pinned" ]]; then echo "$here/k8s"; return; fi
  [[ "$version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || {
    log "Kubernetes version $version is not of the form v1.MINOR.PATCH"; return 1; }
  local dir; dir="$(cache_root)/gomod/kube-$version"
  if [[ -f "$dir/go.sum" ]]; then echo "$dir"; return; fi
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "making the Go module for Kubernetes $version in $dir (module proxy)"
  (
    cd "$tmp"
    go mod init dra-e2e/kube >/dev/null 2>&1
    local gomod staging=v0.${version#v1.}
    gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
    [[ -n "$gomod" ]] || { log "the module proxy has no k8s.io/kubernetes@$version"; exit 1; }
    for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' "$gomod"); do
      go mod edit -replace="$m=$m@$staging"
    done
    go get "k8s.io/kubernetes/cmd/kube-apiserver@$version" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$version" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$version" \
      "k8s.io/kubernetes/cmd/kubelet@$version" \
      "k8s.io/kubernetes/test/images/sample-device-plugin@$version" >&2
  ) || { rm -rf "$tmp"; return 1; }
  rm -rf "$dir"; mv "$tmp" "$dir"
  echo "$dir"
}

# Copies the runner `built` and its agent (found beside it) into DIR/bin,
# so that a build in the checkout meanwhile changes neither, and writes
# what they were built from into DIR/build.txt. Used by the benches.
copy_runner() {
  local built=$1 dir=$2
  mkdir -p "$dir/bin"
  cp "$built" "$dir/bin/dra-e2e"
  if [[ -x "$(dirname "$built")/dra-e2e-agent" ]]; then cp "$(dirname "$built")/dra-e2e-agent" "$dir/bin/"; fi
  { echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "uncommitted changes in the checkout when the runs started:"
    git status --short 2>/dev/null || true
  } >"$dir/build.txt"
}

# A long run of a bench ("$@"), in a process group of its own with its
# output in file $1; sets rc to its exit code. An interrupt or error of the
# script stops it as Ctrl-C would (the runner stops its cluster on SIGTERM
# as on SIGINT) once the script calls `stop_group` from its EXIT trap, and
# waits until it has.
group_child=
in_group() {
  local out=$1; shift
  rc=0
  setsid "$@" >"$out" 2>&1 &
  group_child=$!
  wait "$group_child" || rc=$?
  group_child=
}

# Stops the run `in_group` started, if it still runs; $1 says what it is.
stop_group() {
  if [[ -n "$group_child" ]] && kill -0 "$group_child" 2>/dev/null; then
    log "stopping $1 (process group $group_child)"
    # TERM, not INT: a background job of a script starts with SIGINT
    # ignored, so an INT sent before the runner installs its handlers is
    # lost and the run goes on with nobody to stop it.
    kill -TERM -- "-$group_child" 2>/dev/null || true
    wait "$group_child" 2>/dev/null || true
  fi
}
