#!/usr/bin/env bash
# The Debian packages the tests need, checked first by `npm test` (test/pretest.sh) so that the README's
# two commands are all a fresh machine needs. As root with apt-get, what is missing is installed, with a
# progress line; otherwise this stops at once with the exact command to run.
#
#   git, python3 + pip        the runtimes and the git sources of the tests
#   openssl, procps           test certificates; pgrep for the process-cleanup checks
#   bubblewrap, slirp4netns   the local sandbox for tenant code and its builds' outbound network
#   util-linux                setpriv and unshare, used by the sandbox probe
#   chromium                  the headless browser the dashboard's tests drive (playwright-core)
#   firefox-esr               the second browser the dashboard must work in (puppeteer-core)
#   rabbitmq-server           the broker amqp Trigger tests start on their own ports (with epmd)
#
# docker-registry and the real node's packages (containerd, runc, ...) are installed by
# test/cluster/build.sh, which knows their versions.
set -euo pipefail

say() { printf '[pretest %3ss] %s\n' "$SECONDS" "$*" >&2; }

# command → the package that provides it
declare -A provides=(
  [git]=git
  [python3]=python3
  [openssl]=openssl
  [pgrep]=procps
  [bwrap]=bubblewrap
  [slirp4netns]=slirp4netns
  [setpriv]=util-linux
  [unshare]=util-linux
  [chromium]=chromium
  [firefox-esr]=firefox-esr
  [rabbitmq-server]=rabbitmq-server
)

missing=()
for cmd in $(printf '%s\n' "${!provides[@]}" | sort); do
  command -v "$cmd" >/dev/null 2>&1 && continue
  pkg="${provides[$cmd]}"
  [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
done
# pip is a module, not a command: `python3 -m pip` is what the Python builds run.
if command -v python3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then missing+=(python3-pip); fi
if [[ " ${missing[*]} " == *" python3 "* ]]; then missing+=(python3-pip); fi

if [ ${#missing[@]} -eq 0 ]; then
  say "system packages: all present"
  exit 0
fi

command="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "system packages missing: ${missing[*]}"
  say "install them as root, then run npm test again:  $command"
  exit 1
fi

say "system packages: installing ${missing[*]} with apt-get (takes a minute)"
export DEBIAN_FRONTEND=noninteractive
# test/cluster/build.sh may hold the dpkg lock at the same moment; wait for it instead of failing.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
run() { "$@" >"$log" 2>&1 || { tail -n 30 "$log" >&2; say "failed: $*"; exit 1; }; }
run apt_get update -qq
run apt_get install -y -qq --no-install-recommends "${missing[@]}"
say "system packages: installed ${missing[*]}"
