// The test node must leave the machine exactly as it found it: processes, bridge and veths, network
// namespaces, iptables/nftables rules, mounts, cgroups, sysctls and host directories, both after a
// normal stop() and after its owner was SIGKILLed (the janitor notices and cleans up), and it must not
// take with it what the machine had before: a developer's own kubelet or CNI chains.
// Needs root, like the node itself.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BRIDGE, CGROUP_ROOT, NODE_LOCK } from './node.ts';

const CHILD = fileURLToPath(new URL('./node-cleanup-child.ts', import.meta.url));

const sh = (cmd: string, args: string[]): string => {
  const res = spawnSync(cmd, args, { encoding: 'utf8' });
  return res.status === 0 ? res.stdout : `(${cmd} ${args.join(' ')}: exit ${res.status})`;
};

// Values that change by themselves while anything runs.
const VOLATILE =
  /^(kernel\.ns_last_pid|kernel\.random\.|fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.pty\.nr|net\.netfilter\.nf_conntrack_count|fs\.binfmt_misc\.|kernel\.sched_|dev\.cdrom\.)/;

const HOST_DIRS = [
  '/run/containerd',
  '/var/lib/cni',
  '/var/log/containers',
  '/var/log/pods',
  '/run/netns',
  '/opt/containerd',
  '/opt/cni',
  '/etc/cni',
  '/var/lib/kubelet',
  '/var/lib/containerd',
  '/etc/kubernetes',
];

/** Everything the node may touch on the host, as comparable text. */
function machineState(): Record<string, string> {
  const iptables: string[] = [];
  for (const bin of ['iptables', 'ip6tables', 'iptables-legacy', 'ip6tables-legacy']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}-save`]).status !== 0) continue;
    iptables.push(
      `## ${bin}`,
      sh(`${bin}-save`, [])
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .map((l) => l.replace(/\[\d+:\d+\]/, ''))
        .join('\n'),
    );
  }
  const cgroups: string[] = [];
  for (const hierarchy of readdirSync('/sys/fs/cgroup')) {
    const dir = `/sys/fs/cgroup/${hierarchy}`;
    try {
      // sless-<pid>: the local platform's per-runtime cgroups, made by other test files running
      // meanwhile on this machine; not the node's.
      for (const child of readdirSync(dir, { withFileTypes: true }))
        if (child.isDirectory() && !/^sless-\d+$/.test(child.name))
          cgroups.push(`${hierarchy}/${child.name}`);
    } catch {
      // not a directory
    }
  }
  return {
    sysctl: sh('sysctl', ['-a'])
      .split('\n')
      .filter((l) => l && !VOLATILE.test(l))
      .sort()
      .join('\n'),
    links: sh('ip', ['-o', 'link', 'show'])
      .split('\n')
      .map((l) => l.split(':')[1]?.trim() ?? '')
      .sort()
      .join('\n'),
    addresses: sh('ip', ['-o', 'addr', 'show']).replace(/valid_lft .*$/gm, ''),
    routes: sh('ip', ['route', 'show', 'table', 'all']),
    netns: sh('ip', ['netns', 'list']),
    iptables: iptables.join('\n'),
    nftables: sh('nft', ['list', 'ruleset']).replace(/packets \d+ bytes \d+/g, 'packets _ bytes _'),
    mounts: readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .sort()
      .join('\n'),
    cgroups: cgroups.sort().join('\n'),
    hostDirs: HOST_DIRS.filter((d) => existsSync(d)).join('\n'),
  };
}

/** Processes that belong to a test node: its binaries, shims and everything mentioning its root. */
function nodeProcesses(root: string): string[] {
  const out = sh('ps', ['-eo', 'pid=,args=']);
  return out
    .split('\n')
    .filter((l) =>
      /containerd-shim|\/kubelet |kube-proxy|kube-controller-manager|kube-scheduler|node-janitor|\/containerd --config/.test(
        l,
      )
        ? true
        : l.includes(root),
    )
    .filter((l) => !l.includes('ps -eo'));
}

function startChild(
  mode: 'wait' | 'stop',
  env: Record<string, string> = {},
): {
  child: ChildProcess;
  ready: Promise<string>;
  output: () => string;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    err += c;
  });
  const ready = new Promise<string>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = /READY (\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`child exited (${code}) before READY:\n${out}\n${err}`)));
  });
  return { child, ready, output: () => `${out}\n${err}` };
}

async function until(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The positive signal that the node really changed the host before we check it was put back. */
function expectNodeChangedHost(state: Record<string, string>): void {
  expect(state.links).toContain(BRIDGE);
  expect(state.iptables).toMatch(/KUBE-SERVICES/);
  expect(state.cgroups).toContain(`memory/${CGROUP_ROOT}`);
  expect(state.mounts).toMatch(/sless-node-.*\/containerd/);
}

/**
 * What a machine with its own kubelet and CNI has before the test node starts: KUBE-/CNI- chains with
 * kube-proxy's and CNI's kinds of comments, and jumps to them from built-in chains. None of it does
 * anything (each chain only returns; the CNI jump matches a subnet nobody uses).
 */
const FOREIGN = [
  {
    table: 'filter',
    chain: 'KUBE-SLESS-FOREIGN',
    from: 'INPUT',
    match: [],
    comment: 'kubernetes: this machine',
  },
  {
    table: 'nat',
    chain: 'CNI-SLESS-FOREIGN',
    from: 'POSTROUTING',
    match: ['-s', '10.254.78.0/24'],
    comment: 'name: "podman" id: "foreign"',
  },
];
type Foreign = (typeof FOREIGN)[number];
const ownRule = (f: Foreign) => [f.chain, '-m', 'comment', '--comment', f.comment, '-j', 'RETURN'];
const jumpRule = (f: Foreign) => [f.from, ...f.match, '-m', 'comment', '--comment', f.comment, '-j', f.chain];

/**
 * Runs fn holding the node lock: no other test node changes the machine between the snapshots taken
 * before and after, nor sees this test's own chains come and go; the node fn starts is told that its
 * caller holds the lock (SLESS_NODE_LOCK_HELD).
 */
async function withNodeLock(fn: () => Promise<void>): Promise<void> {
  const holder = spawn('flock', [NODE_LOCK, 'sh', '-c', 'echo LOCKED; cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      holder.stdout?.setEncoding('utf8').on('data', (c: string) => c.includes('LOCKED') && resolve());
      holder.once('exit', (code) => reject(new Error(`flock ${NODE_LOCK} exited (${code})`)));
    });
    await fn();
  } finally {
    holder.stdin?.end();
    await new Promise((r) => (holder.exitCode === null ? holder.once('exit', r) : r(undefined)));
  }
}

function removeForeignChains(): void {
  for (const f of FOREIGN) {
    spawnSync('iptables', ['-t', f.table, '-D', ...jumpRule(f)]);
    spawnSync('iptables', ['-t', f.table, '-F', f.chain]);
    spawnSync('iptables', ['-t', f.table, '-X', f.chain]);
  }
}

function addForeignChains(): void {
  removeForeignChains();
  for (const f of FOREIGN)
    for (const args of [
      ['-N', f.chain],
      ['-A', ...ownRule(f)],
      ['-A', ...jumpRule(f)],
    ]) {
      const res = spawnSync('iptables', ['-t', f.table, ...args], { encoding: 'utf8' });
      if (res.status !== 0) throw new Error(`iptables -t ${f.table} ${args.join(' ')}: ${res.stderr}`);
    }
}

/** Starts a node in a child process, SIGKILLs the child, and expects the machine as it was. */
async function killedNodeRestoresMachine(env: Record<string, string>): Promise<void> {
  const before = machineState();
  const { child, ready, output } = startChild('wait', env);
  const root = await ready;
  expectNodeChangedHost(machineState());
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  // The janitor polls its owner every second, then stops everything and removes the root last.
  await until(`${root} removed`, () => !existsSync(root), 120_000);
  await until('no node process left', () => nodeProcesses(root).length === 0, 30_000).catch((e) => {
    throw new Error(`${e.message}\n${nodeProcesses(root).join('\n')}\n${output()}`);
  });
  expect(machineState()).toEqual(before);
}

describe('test node cleanup (root only)', () => {
  it('restores the machine when the owning process is SIGKILLed, and keeps the KUBE-/CNI- chains it had', async () => {
    await withNodeLock(async () => {
      addForeignChains();
      try {
        await killedNodeRestoresMachine({ SLESS_NODE_LOCK_HELD: '1' });
        // Said outright, though the comparison above covers it: the machine's own chains and jumps stayed.
        for (const f of FOREIGN) {
          const rules = sh('iptables', ['-t', f.table, '-S']);
          expect(rules).toContain(`-N ${f.chain}\n`);
          expect(rules).toMatch(new RegExp(`^-A ${f.chain} .*-j RETURN$`, 'm'));
          expect(rules).toMatch(new RegExp(`^-A ${f.from} .*-j ${f.chain}$`, 'm'));
        }
      } finally {
        removeForeignChains();
      }
    });
  }, 600_000);

  it('restores the machine after a normal stop()', async () => {
    await withNodeLock(async () => {
      const before = machineState();
      const { child, ready } = startChild('stop', { SLESS_NODE_LOCK_HELD: '1' });
      const root = await ready;
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      expect(code).toBe(0);
      expect(existsSync(root)).toBe(false);
      expect(nodeProcesses(root)).toEqual([]);
      expect(machineState()).toEqual(before);
    });
  }, 600_000);
});
