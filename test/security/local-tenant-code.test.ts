/**
 * Tenant code is hostile (local platform): functions and their install steps try to read sless's
 * environment, another namespace's build, the host's files and loopback ports, and to use more memory
 * or processes than they were given. Each attack runs for real against a running sless with real
 * builds (npm, pip, go); each test first checks that the attack really ran (a positive signal), then
 * that it got nothing.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { functionManifest, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const CANARY = `canary-${process.pid}-${Date.now()}`;
const OTHER_CANARY = `other-tenant-file-${process.pid}`;

/** Reads every /proc/<pid>/environ it can, its parent's first; reports what it saw. */
const ENV_PROBE = `
const fs = require('fs');
function probe() {
  const pids = fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p));
  const environs = {};
  for (const pid of [String(process.ppid), ...pids]) {
    try { environs[pid] = fs.readFileSync('/proc/' + pid + '/environ', 'utf8').slice(0, 600); }
    catch (e) { environs[pid] = 'error ' + e.code; }
  }
  return { ran: true, uid: process.getuid(), ppid: process.ppid, pids, environs, envKeys: Object.keys(process.env) };
}
module.exports = { probe };
`;

/** Tries to reach files and ports it must not: another build, sless's state, loopback listeners. */
const REACH_PROBE = `
const fs = require('fs');
const net = require('net');
function tryConnect(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.once('connect', () => { s.destroy(); resolve('connected'); });
    s.once('timeout', () => { s.destroy(); resolve('timeout'); });
    s.once('error', (e) => resolve('error ' + e.code));
  });
}
function tryRead(path) {
  try { return 'read ' + fs.readFileSync(path, 'utf8'); } catch (e) { return 'error ' + e.code; }
}
function tryList(path) {
  try { return fs.readdirSync(path); } catch (e) { return 'error ' + e.code; }
}
function tryWrite(path) {
  try { fs.writeFileSync(path, 'x'); return 'wrote'; } catch (e) { return 'error ' + e.code; }
}
async function reach(targets) {
  const out = { ran: true, files: {}, lists: {}, writes: {}, ports: {} };
  for (const f of targets.files) out.files[f] = tryRead(f);
  for (const d of targets.dirs) out.lists[d] = tryList(d);
  for (const w of targets.writes) out.writes[w] = tryWrite(w);
  for (const [host, port] of targets.ports) out.ports[host + ':' + port] = await tryConnect(host, port);
  return out;
}
module.exports = { reach };
`;

const allocNode = `exports.handle = async (event) => {
  const mb = Number(event.query.mb);
  const block = Buffer.alloc(mb * 1024 * 1024, 1);
  return { allocatedMb: mb, last: block[block.length - 1] };
};
`;
const allocPython = `def handle(event, context):
    mb = int(event["query"]["mb"])
    block = b"x" * (mb * 1024 * 1024)
    return {"allocatedMb": mb, "last": block[-1]}
`;
const allocGo = `package handler

import (
	"context"
	"strconv"

	sless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
	mb, _ := strconv.Atoi(event.Query["mb"][0])
	block := make([]byte, mb*1024*1024)
	for i := range block {
		block[i] = 1
	}
	return map[string]int{"allocatedMb": mb, "last": int(block[len(block)-1])}, nil
}
`;
const threadsPython = `import threading

def handle(event, context):
    stop = threading.Event()
    started = 0
    error = ""
    threads = []
    try:
        while started < 2000:
            t = threading.Thread(target=stop.wait)
            t.start()
            threads.append(t)
            started += 1
    except Exception as e:
        error = type(e).__name__ + ": " + str(e)
    stop.set()
    for t in threads:
        t.join()
    return {"started": started, "error": error}
`;

function memoryFunctions(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [limit, memoryMb] of [
    ['small', 64],
    ['large', 512],
  ] as const) {
    files[`mem-node-${limit}/function.yaml`] = functionManifest(`mem-node-${limit}`, { memoryMb });
    files[`mem-node-${limit}/handler.js`] = allocNode;
    files[`mem-python-${limit}/function.yaml`] = functionManifest(`mem-python-${limit}`, {
      runtime: 'python3.11',
      memoryMb,
    });
    files[`mem-python-${limit}/handler.py`] = allocPython;
    files[`mem-go-${limit}/function.yaml`] = functionManifest(`mem-go-${limit}`, {
      runtime: 'go1.21',
      entrypoint: 'handler.Handle',
      memoryMb,
    });
    files[`mem-go-${limit}/handler/handler.go`] = allocGo;
  }
  return files;
}

describe('tenant code on the local platform', () => {
  let system: TestSystem;
  let repo: TestRepo;
  let otherRepo: TestRepo;
  let listener: Server;
  let listenerPort: number;
  let slessPort: number;
  let hostPasswd: string[];
  let victimDir: string;

  beforeAll(async () => {
    // sless's own environment holds secrets; a tenant must never see them.
    process.env.SLESS_WEBHOOK_SECRET_CANARY = CANARY;
    // Another tenant's service on a loopback port (sless itself is another).
    listener = createServer((_req, res) => res.end('another tenant'));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    listenerPort = (listener.address() as AddressInfo).port;
    hostPasswd = readFileSync('/etc/passwd', 'utf8').split('\n').filter(Boolean);
    const stateDir = await tempDir('security-state');
    repo = await TestRepo.create({
      'env-fn/function.yaml': `${functionManifest('env-fn')}---\napiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata: { name: env-job }\nspec: { function: env-fn, event: { probe: true }, runId: 1 }\n`,
      'env-fn/handler.js': `const { probe } = require('./probe.js');\nexports.handle = async () => probe();\n`,
      'env-fn/probe.js': ENV_PROBE,
      'reach-fn/function.yaml': functionManifest('reach-fn'),
      'reach-fn/handler.js': `const { reach } = require('./reach.js');\nexports.handle = async (event) => reach(event.body);\n`,
      'reach-fn/reach.js': REACH_PROBE,
      'passwd-fn/function.yaml': functionManifest('passwd-fn', { runtime: 'python3.11' }),
      'passwd-fn/handler.py': 'def handle(event, context):\n    return 1\n',
      'passwd-fn/requirements.txt': '-r /etc/passwd\n',
      'threads-fn/function.yaml': functionManifest('threads-fn', { runtime: 'python3.11', memoryMb: 512 }),
      'threads-fn/handler.py': threadsPython,
      ...memoryFunctions(),
    });
    otherRepo = await TestRepo.create({
      'victim/function.yaml': functionManifest('victim'),
      'victim/handler.js': 'exports.handle = async () => ({ victim: true });\n',
      'victim/secret.txt': OTHER_CANARY,
    });
    system = await startTestSystem({ url: repo.dir, stateDir });
    slessPort = Number(new URL(system.url).port);
    await system.store.apply(gitSource('victims', 'other-tenant', otherRepo.dir, { interval: '1h' }));
    const settled = (count: number) => async () => {
      const fns = await system.store.list('Function');
      return (
        fns.length === count && fns.every((f) => f.status?.phase === 'Ready' || f.status?.phase === 'Failed')
      );
    };
    await eventually(settled(11), 600_000, 'every function built');
    // Now that the victim's build exists and sless's port is known, an install step attacks them.
    victimDir = `${stateDir}/builds/other-tenant/victim`;
    await repo.commit({
      'install-fn/function.yaml': functionManifest('install-fn'),
      'install-fn/handler.js': 'exports.handle = async () => ({ ok: true });\n',
      'install-fn/probe.js': ENV_PROBE,
      'install-fn/reach.js': REACH_PROBE,
      'install-fn/targets.json': JSON.stringify({
        files: ['/etc/shadow'],
        dirs: [victimDir, `${stateDir}/builds`],
        writes: [],
        ports: [
          ['127.0.0.1', slessPort],
          ['127.0.0.1', listenerPort],
          ['10.0.2.2', listenerPort],
        ],
      }),
      'install-fn/attack.js': `
const { probe } = require('./probe.js');
const { reach } = require('./reach.js');
(async () => {
  const env = probe();
  const reached = await reach(require('./targets.json'));
  let registry = 'not tried';
  try { registry = String((await fetch('https://registry.npmjs.org/-/ping')).status); } catch (e) { registry = 'error ' + e.message; }
  console.log('ATTACK-REPORT ' + JSON.stringify({ env, reached, registry }));
})();
`,
      'install-fn/package.json': JSON.stringify({
        name: 'install-fn',
        version: '1.0.0',
        scripts: { preinstall: 'node attack.js' },
      }),
    });
    await system.controller.syncNow('default', 'test');
    await eventually(settled(12), 300_000, 'the install step ran');
  }, 960_000);

  afterAll(async () => {
    delete process.env.SLESS_WEBHOOK_SECRET_CANARY;
    await system?.close();
    await repo?.remove();
    await otherRepo?.remove();
    await new Promise((resolve) => listener?.close(resolve));
  });

  const status = async (name: string, ns = 'default') =>
    (await system.store.get('Function', ns, name))?.status as FunctionStatus | undefined;

  it('every function says in its status that it runs sandboxed, with its memory limit', async () => {
    expect((await status('mem-python-small'))?.isolation).toBe(
      'sandboxed (bubblewrap, own uid, no network); memory 64 MiB enforced; processes <= 256 enforced',
    );
  });

  it("a function cannot read sless's environment through /proc (row 1)", async () => {
    const response = await system.call('/fn/default/env-fn');
    const text = await response.text();
    expect(response.status, text).toBe(200);
    const report = JSON.parse(text) as {
      ran: boolean;
      uid: number;
      pids: string[];
      environs: Record<string, string>;
      envKeys: string[];
    };
    expect(report.ran).toBe(true);
    // Its own pid namespace: the sandbox's init and itself, nothing of the host.
    expect(report.pids.length).toBeLessThanOrEqual(3);
    expect(report.uid).not.toBe(0);
    // The sandbox's init (its parent) is root's: its environment is unreadable.
    expect(report.environs['1']).toBe('error EACCES');
    expect(text).not.toContain(CANARY);
    expect(text).not.toContain('SLESS_WEBHOOK_SECRET');
    expect(report.envKeys).not.toContain('SLESS_WEBHOOK_SECRET_CANARY');
  });

  it('a one-off FunctionJob runs sandboxed too: no view of sless environment (row 1)', async () => {
    const job = await eventually(async () => {
      const j = await system.store.get('FunctionJob', 'default', 'env-job');
      return j?.status?.phase === 'Succeeded' || j?.status?.phase === 'Failed' ? j : undefined;
    });
    const text = JSON.stringify(job.status);
    expect(job.status?.phase, text).toBe('Succeeded');
    const result = job.status?.result as {
      body: { ran: boolean; uid: number; environs: Record<string, string> };
    };
    expect(result.body.ran).toBe(true);
    expect(result.body.uid).not.toBe(0);
    expect(result.body.environs['1']).toBe('error EACCES');
    expect(text).not.toContain(CANARY);
  });

  it("an install step cannot read sless's environment, another namespace's build or host loopback, yet reaches the registry (rows 1, 3)", async () => {
    const fn = await status('install-fn');
    const log = fn?.lastBuild?.logTail ?? '';
    const line = log.split('\n').find((l) => l.startsWith('ATTACK-REPORT ')) ?? '';
    expect(line, log).not.toBe('');
    expect(log).not.toContain(CANARY);
    expect(log).not.toContain('SLESS_WEBHOOK_SECRET');
    const report = JSON.parse(line.slice('ATTACK-REPORT '.length)) as {
      registry: string;
      env: { ran: boolean; uid: number; environs: Record<string, string> };
      reached: {
        lists: Record<string, unknown>;
        files: Record<string, string>;
        ports: Record<string, string>;
      };
    };
    expect(report.env.ran).toBe(true);
    expect(report.env.uid).not.toBe(0);
    expect(report.env.environs['1']).toBe('error EACCES');
    // The network works (the registry answers), but not towards the host's loopback.
    expect(report.registry).toBe('200');
    expect(report.reached.lists[victimDir]).toBe('error ENOENT');
    expect(report.reached.files['/etc/shadow']).toBe('error ENOENT');
    expect(Object.keys(report.reached.ports)).toHaveLength(3);
    for (const [target, result] of Object.entries(report.reached.ports))
      expect(result, target).toMatch(/^error (ECONNREFUSED|ENETUNREACH)$/);
  });

  it("a function cannot see another namespace's build, sless's state or the host, nor write its own build (row 1)", async () => {
    const stateDir = system.stateDir;
    const ownBuild = (await status('reach-fn'))?.image ?? '';
    expect(ownBuild).not.toBe('');
    const response = await system.call('/fn/default/reach-fn', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        files: [`${victimDir}/../victim/secret.txt`, '/root/.bash_history', '/etc/shadow', '/etc/passwd'],
        dirs: [victimDir, `${stateDir}/builds`, stateDir, '/tmp', tmpdir(), '/root'],
        writes: [`${ownBuild}/code/handler.js`, '/usr/evil', '/tmp/own-scratch'],
        ports: [
          ['127.0.0.1', slessPort],
          ['127.0.0.1', listenerPort],
          ['10.0.2.2', listenerPort],
        ],
      }),
    });
    const text = await response.text();
    expect(response.status, text).toBe(200);
    const report = JSON.parse(text) as {
      ran: boolean;
      files: Record<string, string>;
      lists: Record<string, string | string[]>;
      writes: Record<string, string>;
      ports: Record<string, string>;
    };
    expect(report.ran).toBe(true);
    expect(text).not.toContain(OTHER_CANARY);
    expect(report.lists[victimDir]).toBe('error ENOENT');
    expect(report.lists[`${stateDir}/builds`]).toEqual(['default']);
    // Its private /tmp: its own socket directory, no other function's (socket directories are made in
    // the temporary directory sless was given, /tmp unless TMPDIR says otherwise, as in the tests).
    const sockets = (report.lists[tmpdir()] as string[]).filter((entry) => entry.startsWith('sless-fn-'));
    expect(sockets).toHaveLength(1);
    expect(report.files['/etc/shadow']).toBe('error ENOENT');
    // A generated passwd: none of the host's accounts.
    for (const line of hostPasswd.filter((l) => !l.startsWith('root:') && !l.startsWith('nobody:')))
      expect(report.files['/etc/passwd']).not.toContain(line);
    expect(report.writes[`${ownBuild}/code/handler.js`]).toBe('error EROFS');
    expect(report.writes['/usr/evil']).toMatch(/^error (EROFS|EACCES)$/);
    expect(report.writes['/tmp/own-scratch']).toBe('wrote');
    for (const [target, result] of Object.entries(report.ports))
      expect(result, target).toMatch(/^error (ECONNREFUSED|ENETUNREACH)$/);
  });

  it('"-r /etc/passwd" in requirements.txt shows none of the host\'s accounts in the build log (row 1)', async () => {
    const fn = await eventually(async () => {
      const s = await status('passwd-fn');
      return s?.phase === 'Failed' ? s : undefined;
    });
    const log = `${fn.lastBuild?.logTail ?? ''}\n${fn.lastBuild?.message ?? ''}`;
    // pip did read "/etc/passwd": the sandbox's own, generated one.
    expect(log).toContain('Invalid requirement');
    expect(log).toContain('root:x:0:0:root:/root:/usr/sbin/nologin');
    for (const line of hostPasswd.filter((l) => !l.startsWith('root:') && !l.startsWith('nobody:')))
      expect(log).not.toContain(line);
  });

  it.each(['node', 'python', 'go'])(
    'memoryMb holds for %s: 64 MiB cannot allocate 256 MiB, 512 MiB can (row 5)',
    async (runtime) => {
      const large = await system.call(`/fn/default/mem-${runtime}-large?mb=256`);
      expect(large.status, JSON.stringify(await status(`mem-${runtime}-large`))).toBe(200);
      expect(await large.json()).toEqual({ allocatedMb: 256, last: runtime === 'python' ? 120 : 1 });
      const small = await system.call(`/fn/default/mem-${runtime}-small?mb=256`);
      expect(small.status).toBe(502);
      const crashed = await eventually(async () => {
        const s = await status(`mem-${runtime}-small`);
        return (s?.restarts ?? 0) >= 1 ? s : undefined;
      });
      expect(crashed.lastError).toMatch(/process exited \((SIGKILL|code 137)\)/);
      // Within its limit it still serves once restarted.
      const fine = await eventually(async () => {
        const r = await system.call(`/fn/default/mem-${runtime}-small?mb=8`);
        return r.status === 200 ? r : undefined;
      });
      expect(await fine.json()).toEqual({ allocatedMb: 8, last: runtime === 'python' ? 120 : 1 });
    },
  );

  it('a function cannot start more than 256 processes or threads (row 5)', async () => {
    const response = await system.call('/fn/default/threads-fn');
    const report = (await response.json()) as { started: number; error: string };
    expect(report.error).toMatch(/RuntimeError|can't start new thread/);
    expect(report.started).toBeGreaterThan(100);
    expect(report.started).toBeLessThan(256);
  });
});
