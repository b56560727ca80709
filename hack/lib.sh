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
