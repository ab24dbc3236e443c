#!/usr/bin/env bash
# The janitor of one test node (node.ts). Started before anything touches the host, it
#   1. takes the machine-wide node lock (one test node at a time: kube-proxy's iptables chains, the
#      bridge and the kubelet's sysctls are global),
#   2. records what the node may change (sysctls; which host directories exist; every iptables chain
#      and rule and every nftables table),
#   3. prints READY, then waits until its owner process is gone (even by SIGKILL) or it gets SIGTERM,
#   4. puts the machine back: stops the node's processes and every container, removes the KUBE-/CNI-
#      iptables chains and the rules that jump to them or carry their comments that were not there at
#      the start (a machine that runs its own kubelet or CNI keeps its own), runs kube-proxy --cleanup
#      only when the machine had no KUBE- chain before (it removes kube-proxy's chains by name, whoever
#      made them), unmounts everything under the node's root, deletes the bridge and the pod cgroups,
#      writes back every changed sysctl, removes host directories that did not exist before, and
#      finally the root itself.
#
# Usage: SLESS_NODE_LOCK=<lock file> node-janitor.sh <owner pid> <root> <bridge> <cgroup name> <kube-proxy binary>
# With SLESS_NODE_LOCK_HELD=1 the caller already holds the lock (a test that changes the machine before
# the node starts and checks it after the janitor is done, with no other node in between).
# `node-janitor.sh --cleanup-now <root> <bridge> <cgroup name> <kube-proxy binary>` runs step 4 only
# (for a root whose janitor was lost); it needs <root>/janitor/ from a run.
set -uo pipefail
# Our stderr is the test process's; when that is killed, writing to it must not kill us mid-cleanup.
trap '' PIPE

# Host paths the CRI/CNI/kubelet stack creates whatever its configuration says (the kubelet's
# device-plugins directory is fixed at /var/lib/kubelet/device-plugins, for one).
HOST_DIRS=(/run/containerd /var/lib/cni /var/log/containers /var/log/pods /run/netns /var/run/netns /opt/cni /etc/cni
  /var/lib/kubelet /var/lib/containerd /opt/containerd /etc/kubernetes)
# sysctls that change by themselves and are never written back.
VOLATILE='^(kernel\.ns_last_pid|kernel\.random\.|fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.pty\.nr|net\.netfilter\.nf_conntrack_count|kernel\.tainted|fs\.binfmt_misc\.|net\.ipv4\.route\.gc_|kernel\.sched_|dev\.cdrom\.)'

say() { printf '[node-janitor] %s\n' "$*" >&2; }

cgroup_dirs() {
  # Every cgroup hierarchy (v1 controllers, named ones and the unified one) holding our root cgroup.
  local m
  for m in /sys/fs/cgroup/*; do [ -d "$m/$1" ] && echo "$m/$1"; done
}

snapshot_sysctls() { sysctl -a 2>/dev/null | grep -Ev "$VOLATILE" | LC_ALL=C sort; }

# Every backend present (a distribution may ship legacy and nft side by side) and the tables the node's
# chains live in.
IPTABLES_BINS=(iptables ip6tables iptables-legacy ip6tables-legacy iptables-nft ip6tables-nft)
IPTABLES_TABLES=(filter nat mangle raw)

# The chains and rules of every table before the node starts: what cleanup must leave alone.
record_iptables() {
  local root="$1" bin table
  mkdir -p "$root/janitor/iptables"
  for bin in "${IPTABLES_BINS[@]}"; do
    command -v "$bin" >/dev/null 2>&1 || continue
    for table in "${IPTABLES_TABLES[@]}"; do
      # A table that cannot be listed yet has no chain of anyone's.
      "$bin-save" -t "$table" 2>/dev/null | grep -E '^(:|-A )' >"$root/janitor/iptables/$bin-$table" || true
    done
  done
}

record() {
  local root="$1" d
  mkdir -p "$root/janitor"
  record_iptables "$root"
  snapshot_sysctls >"$root/janitor/sysctl.before"
  : >"$root/janitor/absent-dirs"
  for d in "${HOST_DIRS[@]}"; do [ -e "$d" ] || [ -L "$d" ] || echo "$d" >>"$root/janitor/absent-dirs"; done
}

kill_pids() {
  local sig="$1"
  shift
  [ $# -gt 0 ] && kill "-$sig" "$@" 2>/dev/null
}

# Processes of the node: the supervised servers (process groups listed by node.ts), anything whose
# command line names the root (containerd shims), and every task in the pod cgroups (containers).
node_pids() {
  local root="$1" cg="$2" f d
  if [ -f "$root/janitor/pgids" ]; then
    while read -r f; do
      [ -n "$f" ] && pgrep -g "$f" 2>/dev/null
    done <"$root/janitor/pgids"
  fi
  for f in $(pgrep -f -- "$root/" 2>/dev/null); do
    # A process that exited since pgrep listed it has nothing left to stop (its cmdline is gone).
    cmd="$(tr '\0' ' ' 2>/dev/null <"/proc/$f/cmdline")" || continue
    # Not the janitor itself, nor the subshells it forks (they share its command line).
    case "$cmd" in *node-janitor.sh*) ;; *) echo "$f" ;; esac
  done
  for d in $(cgroup_dirs "$cg"); do
    find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
}

stop_processes() {
  local root="$1" cg="$2" pids i
  # Freeze-free approach: TERM everything, give it a moment, then KILL until nothing is left.
  mapfile -t pids < <(node_pids "$root" "$cg" | sort -un)
  kill_pids TERM "${pids[@]}"
  for i in $(seq 1 20); do
    mapfile -t pids < <(node_pids "$root" "$cg" | sort -un)
    [ ${#pids[@]} -eq 0 ] && return 0
    [ "$i" -gt 4 ] && kill_pids KILL "${pids[@]}"
    sleep 0.5
  done
  say "processes still alive after SIGKILL: ${pids[*]}"
}

# KUBE-/CNI- chains that existed before the node started in any backend: another kubelet, kube-proxy or
# CNI on this machine. Then `kube-proxy --cleanup` must not run: it deletes kube-proxy's chains by name.
had_foreign_chains() {
  local root="$1"
  [ -d "$root/janitor/iptables" ] || return 1
  cat "$root/janitor/iptables/"* 2>/dev/null | grep -qE '^:(KUBE|CNI)-'
}

# The chains of kube-proxy, the kubelet and CNI that the node made, and the rules it added to chains
# that were there before (jumps to its chains, rules with kube-proxy's or CNI's comments), in every
# table of every iptables backend; what existed at the start stays, whatever its name.
clean_iptables() {
  local root="$1" bin table before now chain line
  for bin in "${IPTABLES_BINS[@]}"; do
    command -v "$bin" >/dev/null 2>&1 || continue
    for table in "${IPTABLES_TABLES[@]}"; do
      before="$root/janitor/iptables/$bin-$table"
      # Without a record of the start nothing can be told apart: touch nothing.
      [ -f "$before" ] || continue
      now="$("$bin-save" -t "$table" 2>/dev/null)" || continue
      # New rules in chains that existed before, deleted by their own spec (rules in new chains go
      # with their chains).
      grep -E '^-A ' <<<"$now" | grep -vxF -f "$before" \
        | grep -E -- '-j (KUBE|CNI)-|--comment "?(kubernetes|CNI|name: "sless|id: ")' \
        | while IFS= read -r line; do
          chain="${line#-A }"
          chain="${chain%% *}"
          grep -qxF -- ":$chain" <(sed 's/ .*//' "$before") || continue
          # shellcheck disable=SC2086
          eval "$bin -t $table ${line/#-A/-D}" 2>/dev/null
        done
      mapfile -t chains < <(sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p' <<<"$now" | grep -vxF -f <(sed -n 's/^:\([^ ]*\) .*/\1/p' "$before"))
      # Flush all first: a new chain may jump to another.
      for chain in "${chains[@]}"; do "$bin" -t "$table" -F "$chain" 2>/dev/null; done
      for chain in "${chains[@]}"; do "$bin" -t "$table" -X "$chain" 2>/dev/null; done
      # Rules of the start that are gone: another kube-proxy's, replaced by ours. Said, not rewritten.
      line="$(grep -E '^-A ' "$before" | grep -cvxF -f <(grep -E '^-A ' <<<"$("$bin-save" -t "$table" 2>/dev/null)") || true)"
      [ "${line:-0}" -gt 0 ] && say "$bin -t $table: $line rule(s) of the start are gone (another kube-proxy or CNI on this machine?)"
    done
  done
  # kube-proxy 1.3x probes nftables too; its tables are named kube-proxy. Only ours go.
  if command -v nft >/dev/null 2>&1; then
    for table in "ip kube-proxy" "ip6 kube-proxy"; do
      grep -qx "table $table" "$root/janitor/nft-tables.before" 2>/dev/null && continue
      # shellcheck disable=SC2086
      nft delete table $table 2>/dev/null
    done
  fi
}

# Tables that appeared only because our chains were created in them (empty now) are dropped, so the
# nftables ruleset is exactly as before.
drop_new_empty_tables() {
  local root="$1" fam name
  command -v nft >/dev/null 2>&1 || return 0
  [ -f "$root/janitor/nft-tables.before" ] || return 0
  nft list tables 2>/dev/null | while read -r _ fam name; do
    grep -qx "table $fam $name" "$root/janitor/nft-tables.before" && continue
    # Only tables without a single rule.
    if ! nft list table "$fam" "$name" 2>/dev/null | grep -qE '^\s+(counter|jump|ip|ip6|meta|ct|tcp|udp|mark|goto|return|accept|drop|masquerade|dnat|snat|xt|iifname|oifname)'; then
      nft delete table "$fam" "$name" 2>/dev/null
    fi
  done
}

unmount_under() {
  local root="$1" mp i
  for i in 1 2 3; do
    # Deepest first; mountinfo escapes spaces as \040.
    mapfile -t mps < <(awk -v r="$root/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    [ ${#mps[@]} -eq 0 ] && return 0
    for mp in "${mps[@]}"; do
      mp="$(printf '%b' "${mp//\\040/ }")"
      umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null
    done
  done
}

remove_cgroups() {
  local cg="$1" d
  for d in $(cgroup_dirs "$cg"); do
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
    [ -d "$d" ] && say "cgroup $d is still there"
  done
}

restore_sysctls() {
  local root="$1" key value path
  [ -f "$root/janitor/sysctl.before" ] || return 0
  # Lines present before and changed since: "key = value".
  LC_ALL=C comm -23 "$root/janitor/sysctl.before" <(snapshot_sysctls) | while IFS= read -r line; do
    key="${line%% = *}"
    value="${line#* = }"
    path="/proc/sys/${key//.//}"
    [ -w "$path" ] || continue
    printf '%s\n' "$value" >"$path" 2>/dev/null || say "could not restore $key"
  done
}

cleanup() {
  local root="$1" bridge="$2" cg="$3" kube_proxy="$4" d
  say "restoring the machine (root $root)"
  stop_processes "$root" "$cg"
  if had_foreign_chains "$root"; then
    say "processes stopped (${SECONDS}s); KUBE-/CNI- chains were here before the node: not running kube-proxy --cleanup"
  else
    [ -x "$kube_proxy" ] && "$kube_proxy" --cleanup >/dev/null 2>&1
    say "processes stopped, kube-proxy --cleanup ran (${SECONDS}s)"
  fi
  clean_iptables "$root"
  drop_new_empty_tables "$root"
  unmount_under "$root"
  ip link delete "$bridge" 2>/dev/null
  # veths of pods whose netns was already gone.
  for d in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'); do
    [ -n "$(ip -o link show "$d" 2>/dev/null | grep "master $bridge")" ] && ip link delete "$d" 2>/dev/null
  done
  remove_cgroups "$cg"
  restore_sysctls "$root"
  if [ -f "$root/janitor/absent-dirs" ]; then
    while read -r d; do [ -n "$d" ] && rm -rf --one-file-system "$d"; done <"$root/janitor/absent-dirs"
  fi
  unmount_under "$root"
  say "host restored (${SECONDS}s); removing $root"
  rm -rf --one-file-system "$root"
  say "done (${SECONDS}s)"
}

if [ "${1:-}" = "--cleanup-now" ]; then
  shift
  cleanup "$@"
  exit 0
fi

owner="$1" root="$2" bridge="$3" cg="$4" kube_proxy="$5"
LOCK="${SLESS_NODE_LOCK:?SLESS_NODE_LOCK names the machine-wide node lock file}"
mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
if [ "${SLESS_NODE_LOCK_HELD:-}" = 1 ]; then
  say "the machine-wide test node lock $LOCK is held by the caller"
else
  say "waiting for the machine-wide test node lock $LOCK"
  flock 9
fi
SECONDS=0
record "$root"
command -v nft >/dev/null 2>&1 && nft list tables 2>/dev/null >"$root/janitor/nft-tables.before"
done_=0
finish() {
  [ "$done_" = 1 ] && return
  done_=1
  SECONDS=0
  cleanup "$root" "$bridge" "$cg" "$kube_proxy"
  exit 0
}
trap finish TERM INT HUP
echo READY
while kill -0 "$owner" 2>/dev/null; do
  sleep 1 &
  wait $!
done
finish
