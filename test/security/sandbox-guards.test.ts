/**
 * Each guard of the local sandbox, attacked on its own through a running sless with sandboxed builds
 * and functions in two namespaces: the tenant's own uid (and that it differs between namespaces), its
 * own user, pid and network namespaces, no capabilities and no new privileges, no network for a
 * function and no host loopback for a build, the memory and process limits of the cgroups, an
 * environment with none of sless's secrets (a variable whose name merely starts like an allowed one
 * included), and none of sless's state directory in view. Node functions only, so that the whole file
 * builds in seconds and `npm run mutate:guards` can run it once per weakened guard.
 *
 * Every attack first shows that it ran (a positive signal), then that it got nothing.
 */
import { readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { tenantUid } from '../../src/sandbox/launcher.js';
import { functionManifest, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const OTHER_NS = 'other-tenant';
/**
 * sless's own environment: a git token, a cloud key, and a key whose name starts like LANG (a
 * variable functions are given), so that an allow-list that is not anchored at its end lets it through.
 */
const SECRETS: Record<string, string> = {
  SLESS_SECRET_DEFAULT__GIT_TOKEN: `git-token-canary-${process.pid}`,
  AWS_SECRET_ACCESS_KEY: `aws-canary-${process.pid}`,
  LANGSMITH_API_KEY: `langsmith-canary-${process.pid}`,
};
const OTHER_CANARY = `other-tenant-build-${process.pid}`;

/** Reports who and where it runs, and tries every way out it is given. */
const PROBE = `
const fs = require('fs');
const os = require('os');
const net = require('net');
function tryConnect(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.once('connect', () => { s.destroy(); resolve('connected'); });
    s.once('timeout', () => { s.destroy(); resolve('timeout'); });
    s.once('error', (e) => resolve('error ' + e.code));
  });
}
const attempt = (f) => { try { return f(); } catch (e) { return 'error ' + e.code; } };
function statusField(name) {
  const text = fs.readFileSync('/proc/self/status', 'utf8');
  const match = text.match(new RegExp('^' + name + ':\\\\s*(\\\\S+)', 'm'));
  return match ? match[1] : 'missing';
}
async function probe(targets) {
  const out = { ran: true, uid: process.getuid(), gid: process.getgid(), ns: {}, lists: {}, files: {}, writes: {}, ports: {} };
  for (const kind of ['pid', 'net', 'mnt', 'user', 'ipc', 'uts'])
    out.ns[kind] = attempt(() => fs.readlinkSync('/proc/self/ns/' + kind));
  out.uidMap = attempt(() => fs.readFileSync('/proc/self/uid_map', 'utf8').trim().split(/\\s+/).map(Number));
  out.capEff = statusField('CapEff');
  out.capPrm = statusField('CapPrm');
  out.noNewPrivs = statusField('NoNewPrivs');
  out.interfaces = Object.keys(os.networkInterfaces()).sort();
  out.processes = fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).length;
  out.env = process.env;
  for (const d of targets.dirs) out.lists[d] = attempt(() => fs.readdirSync(d).sort());
  for (const f of targets.files) out.files[f] = attempt(() => 'read ' + fs.readFileSync(f, 'utf8'));
  for (const w of targets.writes) out.writes[w] = attempt(() => { fs.writeFileSync(w, 'x'); return 'wrote'; });
  for (const [host, port] of targets.ports) out.ports[host + ':' + port] = await tryConnect(host, port);
  return out;
}
module.exports = { probe };
`;

const PROBE_HANDLER = `const { probe } = require('./probe.js');\nexports.handle = async (event) => probe(event.body);\n`;

/** Allocates outside the V8 heap, which only the memory cgroup limits. */
const ALLOC = `exports.handle = async (event) => {
  const mb = Number(event.query.mb);
  const block = Buffer.alloc(mb * 1024 * 1024, 1);
  return { allocatedMb: mb, last: block[block.length - 1] };
};
`;

/** Starts processes until the kernel refuses one, then ends them all. */
const FORK = `const { spawn } = require('child_process');
exports.handle = async () => {
  const children = [];
  let error = '';
  while (children.length < 300) {
    let child;
    try { child = spawn('sleep', ['120'], { stdio: 'ignore' }); } catch (e) { error = e.code; break; }
    const failed = await new Promise((resolve) => {
      child.once('spawn', () => resolve(undefined));
      child.once('error', (e) => resolve(e));
    });
    if (failed) { error = failed.code; break; }
    children.push(child);
  }
  const started = children.length;
  await Promise.all(children.map((c) => new Promise((resolve) => { c.once('exit', resolve); c.kill('SIGKILL'); })));
  return { started, error };
};
`;

interface Probe {
  ran: boolean;
  uid: number;
  gid: number;
  ns: Record<string, string>;
  uidMap: number[] | string;
  capEff: string;
  capPrm: string;
  noNewPrivs: string;
  interfaces: string[];
  processes: number;
  env: Record<string, string>;
  lists: Record<string, string[] | string>;
  files: Record<string, string>;
  writes: Record<string, string>;
  ports: Record<string, string>;
}

const hostNamespaces = Object.fromEntries(
  ['pid', 'net', 'mnt', 'user', 'ipc', 'uts'].map((kind) => [kind, readlinkSync(`/proc/self/ns/${kind}`)]),
);

describe('the local sandbox, one guard at a time', () => {
  let system: TestSystem;
  let repo: TestRepo;
  let otherRepo: TestRepo;
  let listener: Server;
  let listenerPort: number;
  let slessPort: number;
  let stateDir: string;
  let otherBuild: string;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    for (const [name, value] of Object.entries(SECRETS)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    // Another tenant's service on a loopback port (sless's own port is another).
    listener = createServer((_req, res) => res.end('another tenant'));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    listenerPort = (listener.address() as AddressInfo).port;
    stateDir = await tempDir('sandbox-guards-state');
    const buildTargets = {
      dirs: [stateDir, `${stateDir}/builds`],
      files: [],
      writes: [],
      // Filled in below, once sless's port is known: the build runs after the first sync.
      ports: [] as [string, number][],
    };
    repo = await TestRepo.create({
      'probe/function.yaml': functionManifest('probe', { memoryMb: 64 }),
      'probe/handler.js': PROBE_HANDLER,
      'probe/probe.js': PROBE,
      'alloc-small/function.yaml': functionManifest('alloc-small', { memoryMb: 64 }),
      'alloc-small/handler.js': ALLOC,
      'alloc-large/function.yaml': functionManifest('alloc-large', { memoryMb: 512 }),
      'alloc-large/handler.js': ALLOC,
      'fork/function.yaml': functionManifest('fork'),
      'fork/handler.js': FORK,
    });
    otherRepo = await TestRepo.create({
      'probe/function.yaml': functionManifest('probe'),
      'probe/handler.js': PROBE_HANDLER,
      'probe/probe.js': PROBE,
      'probe/secret.txt': OTHER_CANARY,
    });
    system = await startTestSystem({
      url: repo.dir,
      stateDir,
      buildCacheDir: await tempDir('sandbox-cache'),
    });
    slessPort = Number(new URL(system.url).port);
    await system.store.apply(gitSource('other', OTHER_NS, otherRepo.dir, { interval: '1h' }));
    const settled = (count: number) => async () => {
      const fns = await system.store.list('Function');
      return (
        fns.length === count && fns.every((f) => f.status?.phase === 'Ready' || f.status?.phase === 'Failed')
      );
    };
    await eventually(settled(5), 300_000, 'every function built');
    otherBuild = (await status('probe', OTHER_NS))?.image ?? '';
    expect(otherBuild).not.toBe('');
    // An install step (npm's preinstall) that probes the same way, now that the ports are known.
    buildTargets.ports = [
      ['127.0.0.1', slessPort],
      ['127.0.0.1', listenerPort],
      // slirp4netns's address for the host's loopback.
      ['10.0.2.2', listenerPort],
    ];
    buildTargets.dirs.push(otherBuild);
    await repo.commit({
      'builder/function.yaml': functionManifest('builder'),
      'builder/handler.js': 'exports.handle = async () => 1;\n',
      'builder/probe.js': PROBE,
      'builder/targets.json': JSON.stringify(buildTargets),
      // The report must fit the build's log tail: the variables' names, not npm's long values.
      'builder/attack.js': `require('./probe.js').probe(require('./targets.json')).then((r) => {
  r.envKeys = Object.keys(r.env).sort();
  r.npmCache = r.env.npm_config_cache;
  delete r.env;
  console.log('BUILD-REPORT ' + JSON.stringify(r));
});\n`,
      'builder/package.json': JSON.stringify({
        name: 'builder',
        version: '1.0.0',
        scripts: { preinstall: 'node attack.js' },
      }),
    });
    await system.controller.syncNow('default', 'test');
    await eventually(settled(6), 300_000, 'the install step ran');
  }, 660_000);

  afterAll(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await system?.close();
    await repo?.remove();
    await otherRepo?.remove();
    await new Promise((resolve) => listener?.close(resolve));
  });

  async function status(name: string, ns = 'default'): Promise<FunctionStatus | undefined> {
    return (await system.store.get('Function', ns, name))?.status as FunctionStatus | undefined;
  }

  async function probe(ns: string, targets: Partial<Record<'dirs' | 'files' | 'writes', string[]>> = {}) {
    const response = await system.call(`/fn/${ns}/probe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        dirs: targets.dirs ?? [],
        files: targets.files ?? [],
        writes: targets.writes ?? [],
        ports: [
          ['127.0.0.1', slessPort],
          ['127.0.0.1', listenerPort],
        ],
      }),
    });
    const text = await response.text();
    expect(response.status, text).toBe(200);
    const report = JSON.parse(text) as Probe;
    expect(report.ran).toBe(true);
    return { report, text };
  }

  const hostUidOf = (report: Probe) => {
    // uid_map: "inside outside count"; the tenant is uid 1000 inside, its host uid outside.
    const map = report.uidMap as number[];
    expect(map).toHaveLength(3);
    expect(map[0]).toBe(1000);
    expect(map[2]).toBe(1);
    return map[1];
  };

  it("a function runs as its namespace's own host uid, a different one per namespace, never root", async () => {
    const own = await probe('default');
    const other = await probe(OTHER_NS);
    expect(own.report.uid).toBe(1000);
    expect(hostUidOf(own.report)).toBe(tenantUid('default'));
    expect(hostUidOf(other.report)).toBe(tenantUid(OTHER_NS));
    expect(tenantUid('default')).not.toBe(tenantUid(OTHER_NS));
  });

  it('a function has user, pid, network, mount, ipc and uts namespaces of its own', async () => {
    const { report } = await probe('default');
    for (const kind of ['user', 'pid', 'net', 'mnt', 'ipc', 'uts']) {
      expect(report.ns[kind], kind).toMatch(new RegExp(`^${kind}:\\[\\d+\\]$`));
      expect(report.ns[kind], kind).not.toBe(hostNamespaces[kind]);
    }
    // Its own pid namespace: the sandbox's init, the runtime, nothing of the host.
    expect(report.processes).toBeLessThanOrEqual(3);
  });

  it('a function holds no capability and cannot gain privileges (no new privileges)', async () => {
    const { report } = await probe('default');
    // (Its bounding set is full again, but of its own user namespace: the kernel gives a new user
    // namespace a full set, which holds nothing outside it.)
    expect(report.capEff).toBe('0000000000000000');
    expect(report.capPrm).toBe('0000000000000000');
    expect(report.noNewPrivs).toBe('1');
  });

  it("a function has no network: loopback only inside, neither sless's port nor another service's", async () => {
    const { report } = await probe('default');
    expect(report.interfaces).toEqual(['lo']);
    expect(Object.keys(report.ports)).toHaveLength(2);
    for (const [target, result] of Object.entries(report.ports))
      expect(result, target).toMatch(/^error (ECONNREFUSED|ENETUNREACH)$/);
  });

  it("a function's environment holds none of sless's, however the variable is named", async () => {
    const { report, text } = await probe('default');
    // Its own settings are there (the positive signal)...
    expect(report.env.SLESS_FUNCTION_NAME).toBe('probe');
    expect(report.env.SLESS_NAMESPACE).toBe('default');
    // ...and nothing of sless's own.
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(Object.keys(report.env), name).not.toContain(name);
      expect(text, name).not.toContain(value);
    }
  });

  it("a function sees neither sless's state directory nor another namespace's build, and cannot write its own", async () => {
    const ownBuild = (await status('probe'))?.image ?? '';
    expect(ownBuild.startsWith(`${stateDir}/builds/default/probe/`)).toBe(true);
    const { report, text } = await probe('default', {
      dirs: [stateDir, `${stateDir}/builds`, `${stateDir}/builds/default`, `${stateDir}/state`, otherBuild],
      files: [`${otherBuild}/code/secret.txt`, '/etc/shadow'],
      writes: [`${ownBuild}/code/handler.js`, '/tmp/own-scratch'],
    });
    expect(report.lists[`${stateDir}/builds/default`]).toEqual(['probe']);
    expect(report.lists[stateDir]).toEqual(['builds']);
    expect(report.lists[`${stateDir}/builds`]).toEqual(['default']);
    expect(report.lists[`${stateDir}/state`]).toBe('error ENOENT');
    expect(report.lists[otherBuild]).toBe('error ENOENT');
    expect(report.files[`${otherBuild}/code/secret.txt`]).toBe('error ENOENT');
    expect(report.files['/etc/shadow']).toBe('error ENOENT');
    expect(text).not.toContain(OTHER_CANARY);
    expect(report.writes[`${ownBuild}/code/handler.js`]).toBe('error EROFS');
    expect(report.writes['/tmp/own-scratch']).toBe('wrote');
  });

  it('memoryMb is a hard limit: 64 MiB cannot allocate 256 MiB outside the heap, 512 MiB can', async () => {
    const large = await system.call('/fn/default/alloc-large?mb=256');
    expect(large.status, JSON.stringify(await status('alloc-large'))).toBe(200);
    expect(await large.json()).toEqual({ allocatedMb: 256, last: 1 });
    const small = await system.call('/fn/default/alloc-small?mb=256');
    const text = await small.text();
    expect(small.status, text).toBe(502);
    const crashed = await eventually(async () => {
      const s = await status('alloc-small');
      return (s?.restarts ?? 0) >= 1 ? s : undefined;
    });
    expect(crashed.lastError).toMatch(/process exited \((SIGKILL|code 137)\)/);
    const fine = await eventually(async () => {
      const r = await system.call('/fn/default/alloc-small?mb=8');
      return r.status === 200 ? r : undefined;
    });
    expect(await fine.json()).toEqual({ allocatedMb: 8, last: 1 });
  });

  it('a function cannot start more than 256 processes', async () => {
    const response = await system.call('/fn/default/fork');
    const text = await response.text();
    expect(response.status, text).toBe(200);
    const report = JSON.parse(text) as { started: number; error: string };
    expect(report.error).toBe('EAGAIN');
    // It did start many (the positive signal), and stopped short of the cap with the runtime's own.
    expect(report.started).toBeGreaterThan(100);
    expect(report.started).toBeLessThan(256);
  });

  it("an install step has a network of its own without the host's loopback, no secret, and no view of sless's state", async () => {
    const fn = await status('builder');
    const log = fn?.lastBuild?.logTail ?? '';
    const line = log.split('\n').find((l) => l.startsWith('BUILD-REPORT ')) ?? '';
    expect(line, log).not.toBe('');
    const report = JSON.parse(line.slice('BUILD-REPORT '.length)) as Probe & {
      envKeys: string[];
      npmCache: string;
    };
    expect(report.ran).toBe(true);
    expect(fn?.lastBuild?.result).toBe('Succeeded');
    // Its own uid and namespaces, as a function's.
    expect(hostUidOf(report)).toBe(tenantUid('default'));
    expect(report.ns.net).not.toBe(hostNamespaces.net);
    expect(report.capEff).toBe('0000000000000000');
    expect(report.noNewPrivs).toBe('1');
    // A network (slirp4netns's tap0), but no way to the host's loopback through it or directly.
    expect(report.interfaces).toEqual(['lo', 'tap0']);
    expect(Object.keys(report.ports)).toHaveLength(3);
    for (const [target, result] of Object.entries(report.ports))
      expect(result, target).toMatch(/^error (ECONNREFUSED|ENETUNREACH)$/);
    // The package manager's settings are there (the positive signal), sless's secrets are not.
    expect(report.npmCache).toMatch(/\/default\/npm$/);
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(report.envKeys, name).not.toContain(name);
      expect(log, name).not.toContain(value);
    }
    expect(report.lists[stateDir]).toEqual(['builds']);
    expect(report.lists[otherBuild]).toBe('error ENOENT');
  });
});
