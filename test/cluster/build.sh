#!/usr/bin/env bash
# Builds the binaries of the test cluster (envtest-like) and caches them outside the repo:
#   kube-apiserver and etcd (the etcd version that Kubernetes pins), from Go modules;
#   versitygw (S3 gateway, POSIX backend), from Go modules;
#   docker-registry (distribution 2.8), from Debian's apt package;
#   the real node of the e2e suite (build-node.sh: kubelet, controller-manager, scheduler, kube-proxy,
#   kaniko, pause, base images; containerd and runc from Debian). SLESS_NODE_TESTS=0 leaves it out.
#
# Cache: ${SLESS_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sless/testbin}/<name>-<version>/<name>
# Cached binaries are reused; a warm run only checks files and returns in well under a second.
#
# Usage: bash test/cluster/build.sh            build what is missing
#        bash test/cluster/build.sh --print    print the binary paths (KEY=path), build nothing
#        bash test/cluster/build.sh --regen-gomod   rewrite gomod/kube/go.mod for KUBERNETES_VERSION
# Env:   SLESS_BUILD_JOBS (default 2) bounds `go build -p`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE="${SLESS_TESTBIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sless/testbin}"
KUBE_APISERVER="$CACHE/kube-apiserver-$KUBERNETES_VERSION/kube-apiserver"
ETCD="$CACHE/etcd-$ETCD_VERSION/etcd"
VERSITYGW="$CACHE/versitygw-$VERSITYGW_VERSION/versitygw"
JOBS="${SLESS_BUILD_JOBS:-2}"
# shellcheck source=build-node.sh
source "$HERE/build-node.sh"

log() { printf '[test/cluster/build] %s\n' "$*" >&2; }
die() { printf '[test/cluster/build] ERROR: %s\n' "$*" >&2; exit 1; }

find_registry() {
  if command -v docker-registry >/dev/null 2>&1; then command -v docker-registry
  elif [ -x /usr/bin/docker-registry ]; then echo /usr/bin/docker-registry
  else return 1; fi
}

with_node() { [ "${SLESS_NODE_TESTS:-1}" != 0 ]; }

print_paths() {
  echo "KUBE_APISERVER=$KUBE_APISERVER"
  echo "ETCD=$ETCD"
  echo "VERSITYGW=$VERSITYGW"
  echo "DOCKER_REGISTRY=$(find_registry || echo)"
  if with_node; then node_print_paths; fi
}

# -X flags that give Kubernetes binaries their version (kubectl version, /version, node info).
kube_ldflags() {
  local minor="${KUBERNETES_VERSION#v1.}" v="k8s.io/component-base/version" cv="k8s.io/client-go/pkg/version"
  local date flags="" p
  minor="${minor%%.*}"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in "$v" "$cv"; do
    flags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date -X $p.gitCommit=module-$KUBERNETES_VERSION"
  done
  echo "$flags"
}

require_go() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (or not on PATH). The test cluster builds kube-apiserver, etcd and versitygw from source: install Go >= 1.26 (https://go.dev/dl/) and re-run 'bash test/cluster/build.sh'."
  local v
  v="$(go env GOVERSION)"
  case "$v" in
    go1.2[6-9]*|go1.[3-9]*|go[2-9]*) ;;
    *) die "Go $v is too old: Kubernetes $KUBERNETES_VERSION needs Go >= 1.26." ;;
  esac
}

# Rewrites gomod/kube/go.mod for KUBERNETES_VERSION: one replace line per staging module, read from
# that Kubernetes version's own go.mod in the module cache.
regen_gomod() {
  require_go
  local dir kmod staging
  dir="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  kmod="$dir/go.mod"
  [ -f "$kmod" ] || die "cannot read $kmod"
  staging="v0.${KUBERNETES_VERSION#v1.}"
  {
    echo "// Wrapper module: builds kube-apiserver and etcd at the versions Kubernetes pins, for test/cluster."
    echo "// Regenerate with: bash test/cluster/build.sh --regen-gomod (after editing versions.env)."
    echo "module sless.dev/testcluster/kube"
    echo
    echo "go $(sed -n 's/^go //p' "$kmod")"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $KUBERNETES_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo ")"
    echo
    echo "tool ("
    echo "	k8s.io/kubernetes/cmd/kube-apiserver"
    echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
    echo "	k8s.io/kubernetes/cmd/kube-proxy"
    echo "	k8s.io/kubernetes/cmd/kube-scheduler"
    echo "	k8s.io/kubernetes/cmd/kubelet"
    echo "	k8s.io/kubernetes/cmd/kubectl"
    echo "	go.etcd.io/etcd/server/v3"
    echo ")"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' "$kmod" | awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$HERE/gomod/kube/go.mod"
  rm -f "$HERE/gomod/kube/go.sum"
  (cd "$HERE/gomod/kube" && GOFLAGS=-mod=mod go mod tidy)
  log "rewrote gomod/kube/go.mod for Kubernetes $KUBERNETES_VERSION (staging $staging); check that etcd stays at $ETCD_VERSION"
}

# go_build <module dir> <package> <output> [ldflags...]
go_build() {
  local moddir="$1" pkg="$2" out="$3" ldflags="$4" start tmp
  start=$SECONDS
  mkdir -p "$(dirname "$out")"
  tmp="$out.tmp.$$"
  log "building $pkg -> $out (go build -p $JOBS)"
  (cd "$moddir" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -p "$JOBS" -trimpath -ldflags "-s -w $ldflags" -o "$tmp" "$pkg")
  mv -f "$tmp" "$out"
  log "built $(basename "$out") in $((SECONDS - start))s"
}

ensure_registry() {
  if find_registry >/dev/null; then return 0; fi
  log "docker-registry not found: installing Debian package docker-registry (distribution 2.8) with apt-get"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "docker-registry is missing and we are not root: run 'apt-get install -y docker-registry' as root."
    sudo="sudo"
  fi
  # The package's own system service is never used: the fixture runs the binary with its own config.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker-registry >&2 \
    || { $sudo apt-get update -qq >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker-registry >&2; } \
    || die "could not install docker-registry with apt-get"
  find_registry >/dev/null || die "docker-registry still not found after apt-get install"
  # On a systemd host the package enables and starts its service on :5000; we just installed it, and
  # tests never use it, so switch it off again.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl disable --now docker-registry.service >&2 || log "could not disable docker-registry.service (harmless)"
  fi
}

main() {
  case "${1:-}" in
    --print) print_paths; return 0 ;;
    --regen-gomod) regen_gomod; return 0 ;;
    "") ;;
    *) die "unknown argument: $1" ;;
  esac

  local total=$SECONDS
  if [ -x "$KUBE_APISERVER" ] && [ -x "$ETCD" ] && [ -x "$VERSITYGW" ] && find_registry >/dev/null \
    && { ! with_node || node_is_built; }; then
    log "all binaries cached in $CACHE (kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION, versitygw $VERSITYGW_VERSION)"
    print_paths
    return 0
  fi

  mkdir -p "$CACHE"
  # Several test workers (or a CI step and a test run) may call us at once: build under one lock.
  exec 9>"$CACHE/.build.lock"
  if command -v flock >/dev/null 2>&1; then
    log "waiting for the build lock $CACHE/.build.lock"
    flock 9
  fi

  ensure_registry

  if [ ! -x "$KUBE_APISERVER" ] || [ ! -x "$ETCD" ] || [ ! -x "$VERSITYGW" ]; then
    require_go
    grep -q "k8s.io/kubernetes $KUBERNETES_VERSION" "$HERE/gomod/kube/go.mod" \
      || die "gomod/kube/go.mod does not require k8s.io/kubernetes $KUBERNETES_VERSION: run 'bash test/cluster/build.sh --regen-gomod'"
  fi

  if [ ! -x "$KUBE_APISERVER" ]; then
    log "kube-apiserver is the long one: about 5 minutes on 2 cores with an empty Go build cache"
    go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kube-apiserver "$KUBE_APISERVER" "$(kube_ldflags)"
  fi
  if [ ! -x "$ETCD" ]; then
    go_build "$HERE/gomod/kube" go.etcd.io/etcd/server/v3 "$ETCD" ""
  fi
  if [ ! -x "$VERSITYGW" ]; then
    go_build "$HERE/gomod/s3" github.com/versity/versitygw/cmd/versitygw "$VERSITYGW" \
      "-X main.Version=$VERSITYGW_VERSION -X main.Build=module -X main.BuildTime=unknown"
  fi
  if with_node && ! node_is_built; then
    # The node takes longer and only the e2e suite needs it: release the control plane's lock so that
    # test runs waiting for kube-apiserver go ahead, and build the node under its own lock.
    flock -u 9 2>/dev/null || true
    exec 8>"$CACHE/.build-node.lock"
    if command -v flock >/dev/null 2>&1; then
      log "waiting for the node build lock $CACHE/.build-node.lock"
      flock 8
    fi
    require_go
    build_node
  fi

  log "done in $((SECONDS - total))s; binaries in $CACHE"
  print_paths
}

main "$@"
