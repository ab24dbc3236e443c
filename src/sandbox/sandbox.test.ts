/**
 * The sandbox's pieces without starting one: bwrap's whole command line (namespaces, read-only system,
 * the run's own paths, then the uid drop), stable unprivileged tenant uids, CgroupLimits on a stand-in
 * cgroup v1 tree, and remembered toolchains used only while PATH, this Node and their directories stay.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bwrapArgs, type SystemView } from './bwrap-args.js';
import { CgroupLimits } from './cgroups.js';
import { tenantUid } from './launcher.js';
import { rememberedToolchains, rememberToolchains } from './probe.js';

const view: SystemView = {
  symlinks: { '/bin': 'usr/bin', '/lib': 'usr/lib' },
  systemDirs: ['/usr'],
  etcEntries: ['/etc/ssl'],
  generatedEtc: { passwd: '/state/sandbox/etc/passwd' },
  toolchainDirs: ['/root/.pyenv/versions/3.11.7'],
  setpriv: '/usr/bin/setpriv',
  unshare: '/usr/bin/unshare',
};

describe('bwrapArgs', () => {
  it('builds the whole command line: namespaces, read-only system, own paths, then the uid drop', () => {
    expect(
      bwrapArgs({
        view,
        cwd: '/state/builds/ns/fn/key/code',
        readable: ['/state/builds/ns/fn/key'],
        writable: ['/tmp/sless-fn-1-abc'],
        uid: 212345,
        waitForNetwork: false,
        command: 'node',
        args: ['server.js'],
      }).join(' '),
    ).toBe(
      [
        '--unshare-pid --unshare-ipc --unshare-uts --unshare-net --unshare-cgroup-try --die-with-parent',
        '--new-session --hostname sless --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib',
        '--proc /proc --dev /dev --perms 1777 --tmpfs /tmp --perms 0755 --dir /etc --ro-bind /etc/ssl /etc/ssl',
        '--ro-bind /state/sandbox/etc/passwd /etc/passwd',
        '--perms 0755 --dir /root --perms 0755 --dir /root/.pyenv --perms 0755 --dir /root/.pyenv/versions',
        '--ro-bind /root/.pyenv/versions/3.11.7 /root/.pyenv/versions/3.11.7',
        '--perms 0755 --dir /state --perms 0755 --dir /state/builds --perms 0755 --dir /state/builds/ns',
        '--perms 0755 --dir /state/builds/ns/fn --ro-bind /state/builds/ns/fn/key /state/builds/ns/fn/key',
        '--bind /tmp/sless-fn-1-abc /tmp/sless-fn-1-abc --chdir /state/builds/ns/fn/key/code --',
        '/usr/bin/setpriv --reuid=212345 --regid=212345 --clear-groups --bounding-set=-all --inh-caps=-all',
        '--no-new-privs -- /usr/bin/unshare --user --map-user=1000 --map-group=1000 -- node server.js',
      ].join(' '),
    );
  });

  it('waits for the network helper only when asked', () => {
    const args = (waitForNetwork: boolean) =>
      bwrapArgs({
        view,
        cwd: '/',
        readable: [],
        writable: [],
        uid: 1,
        waitForNetwork,
        command: 'x',
        args: [],
      });
    expect(args(true).join(' ')).toContain('--info-fd 3 --block-fd 4');
    expect(args(false)).not.toContain('--info-fd');
  });
});

describe('tenantUid', () => {
  it('is stable, unprivileged and differs between namespaces', () => {
    expect(tenantUid('default')).toBe(tenantUid('default'));
    expect(tenantUid('default')).not.toBe(tenantUid('sless-0123456789abcdef'));
    for (const ns of ['default', 'a', 'sless-0123456789abcdef']) {
      expect(tenantUid(ns)).toBeGreaterThanOrEqual(200_000);
      expect(tenantUid(ns)).toBeLessThan(300_000);
    }
  });
});

describe('CgroupLimits (on a stand-in cgroup tree)', () => {
  let root: string;
  afterEach(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** A directory tree shaped like cgroup v1: files appear when a group is made by mkdir here. */
  async function fakeV1(): Promise<string> {
    root = await mkdtemp(join(tmpdir(), 'sless-cgroup-test-'));
    for (const controller of ['memory', 'pids'])
      mkdirSync(join(root, controller, 'outer'), { recursive: true });
    return root;
  }

  it('writes memoryMb and the process cap into groups below its own, and names what it found', async () => {
    const base = await fakeV1();
    // A real cgroup file system creates these files itself; here the first group is prepared by hand.
    const own = (controller: string) => join(base, controller, 'outer', `sless-${process.pid}`);
    for (const controller of ['memory', 'pids']) {
      mkdirSync(own(controller), { recursive: true });
      writeFileSync(join(own(controller), 'cgroup.procs'), '');
    }
    const limits = new CgroupLimits({ root: base, selfCgroup: '4:memory:/outer\n8:pids:/outer\n0::/\n' });
    expect(limits.has('memory')).toBe(true);
    expect(limits.describe('memory')).toBe(
      `cgroup v1 memory.limit_in_bytes (${join(base, 'memory', 'outer')})`,
    );
    const groups = limits.create({ memoryMb: 64, maxProcesses: 256 });
    expect(groups.procsFiles).toHaveLength(2);
    const [memoryDir, pidsDir] = groups.procsFiles.map((file) => file.replace(/\/cgroup\.procs$/, ''));
    expect(readFileSync(join(memoryDir ?? '', 'memory.limit_in_bytes'), 'utf8')).toBe(
      String(64 * 1024 * 1024),
    );
    expect(readFileSync(join(pidsDir ?? '', 'pids.max'), 'utf8')).toBe('256');
  });

  it('says why a controller is missing, and creates nothing for it', async () => {
    const base = await fakeV1();
    const limits = new CgroupLimits({ root: base, selfCgroup: '0::/\n' });
    expect(limits.has('memory')).toBe(false);
    expect(limits.missing.get('memory')).toMatch(/no memory controller/);
    expect(limits.create({ memoryMb: 64 }).procsFiles).toEqual([]);
    expect(existsSync(join(base, 'memory', 'outer', `sless-${process.pid}`))).toBe(false);
  });
});

describe('remembered toolchains', () => {
  let dir: string | undefined;
  const savedPath = process.env.PATH;
  afterEach(async () => {
    process.env.PATH = savedPath;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('are used while PATH, this Node and every directory are the same, and not otherwise', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sless-toolchains-'));
    const install = join(dir, 'python');
    mkdirSync(join(install, 'bin'), { recursive: true });
    const tools = { binDirs: [join(install, 'bin'), '/usr/bin'], dirs: [install] };
    const runDir = join(dir, 'run');
    expect(rememberedToolchains(runDir)).toBeUndefined();
    rememberToolchains(runDir, tools);
    expect(rememberedToolchains(runDir)).toEqual(tools);

    process.env.PATH = `/elsewhere:${savedPath}`;
    expect(rememberedToolchains(runDir)).toBeUndefined();
    process.env.PATH = savedPath;
    expect(rememberedToolchains(runDir)).toEqual(tools);

    await rm(install, { recursive: true });
    expect(rememberedToolchains(runDir)).toBeUndefined();

    const file = join(runDir, 'toolchains.json');
    const saved = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...saved, node: '/other/node', binDirs: ['/usr/bin'], dirs: [] }));
    expect(rememberedToolchains(runDir)).toBeUndefined();
    writeFileSync(file, JSON.stringify({ ...saved, binDirs: ['relative/bin'], dirs: [] }));
    expect(rememberedToolchains(runDir)).toBeUndefined();
  });
});
