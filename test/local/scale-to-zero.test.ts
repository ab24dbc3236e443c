/**
 * Opt-in scale to zero on the local platform, with a real runtime process: what the platform contract
 * (test/platform) does not cover, which is the process itself, the proxy thread's counts, the
 * platform-wide default and a cron Trigger at zero.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('scale to zero (local)', () => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'lazy/function.yaml': functionManifest('lazy', { scaleToZero: { idleSeconds: 1 } }),
      // Inside the sandbox's pid namespace every process is pid 2: a random id tells processes apart.
      'lazy/handler.js': `const instance = require('node:crypto').randomUUID();\n${nodeHandler('return { instance };')}`,
    });
    system = await startTestSystem({ url: repo.dir });
    // Deployed parked (lazy start): it serves, and its status says it runs nothing yet.
    await eventually(
      async () => (await system.functionStatus('lazy'))?.phase === 'ScaledToZero',
      30_000,
      'lazy ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  // Parking, the held requests' one start and what status says are the platform contract's
  // 'scale-to-zero' case; this is what only the local platform has: an OS process to stop.
  it('stops the idle process itself, not just its route, and the next request starts another', async () => {
    await system.call('/fn/default/lazy');
    const firstPid = system.platform.processId('default', 'lazy') ?? 0;
    expect(firstPid).toBeGreaterThan(0);
    await eventually(async () => system.platform.isParked('default', 'lazy'), 10_000, 'parked');
    await eventually(
      async () => {
        try {
          process.kill(firstPid, 0);
          return false;
        } catch {
          return true;
        }
      },
      10_000,
      'idle process gone',
    );
    expect((await system.call('/fn/default/lazy')).status).toBe(200);
    expect(system.platform.processId('default', 'lazy')).not.toBe(firstPid);
  });

  it('stays up while requests keep coming through the proxy thread, which the main thread never sees', async () => {
    // Once awake, the thread serves the function itself; only the shared counts tell the platform.
    const instanceOf = async () =>
      ((await (await system.call('/fn/default/lazy')).json()) as { instance: string }).instance;
    const first = await instanceOf();
    const seen = new Set([first]);
    // Three idle periods (idleSeconds: 1) of requests 250 ms apart: one process answers them all.
    for (let i = 0; i < 12; i++) {
      await new Promise((r) => setTimeout(r, 250));
      seen.add(await instanceOf());
    }
    expect([...seen]).toEqual([first]);
    expect(system.platform.isParked('default', 'lazy')).toBe(false);
  });
});

/**
 * `--scale-to-zero-after`: every function without its own scaleToZero scales to zero, and a function
 * that runs nothing when it is deployed starts on its first request (lazy start).
 */
describe('platform-wide scale to zero with lazy start (local)', () => {
  let repo: TestRepo;
  let system: TestSystem;
  let stateDir: string;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'idle/function.yaml': functionManifest('idle'),
      'idle/handler.js': nodeHandler(`return { pid: process.pid, version: 1 };`),
    });
    stateDir = await tempDir('lazy-state');
    system = await startTestSystem({ url: repo.dir, scaleToZeroAfter: '1s', stateDir });
    await eventually(
      async () => (await system.functionStatus('idle'))?.phase === 'ScaledToZero',
      30_000,
      'ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('deploys without a process, serves the first request from a fresh one, and parks it when idle', async () => {
    expect(system.platform.isParked('default', 'idle')).toBe(true);
    const first = await system.call('/fn/default/idle');
    expect(first.status).toBe(200);
    const body = (await first.json()) as { pid: number; version: number };
    expect(body.version).toBe(1);
    expect(body.pid).not.toBe(process.pid);
    expect(system.platform.isParked('default', 'idle')).toBe(false);
    // Running: a second request reaches the same process.
    expect(((await (await system.call('/fn/default/idle')).json()) as { pid: number }).pid).toBe(body.pid);
    await eventually(async () => system.platform.isParked('default', 'idle'), 10_000, 'parked again');
  });

  it('a commit to a parked function deploys it parked, and the next request runs the new code', async () => {
    await eventually(async () => system.platform.isParked('default', 'idle'), 10_000, 'parked');
    await repo.commit({ 'idle/handler.js': nodeHandler(`return { pid: process.pid, version: 2 };`) });
    await system.controller.syncNow('default', 'test');
    await system.controller.idle();
    const status = await system.functionStatus('idle');
    expect(status?.phase).toBe('ScaledToZero');
    expect(status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(system.platform.isParked('default', 'idle')).toBe(true);
    const response = await system.call('/fn/default/idle');
    expect(response.status).toBe(200);
    expect(((await response.json()) as { version: number }).version).toBe(2);
  });

  it('a restart parks a parked function again instead of rolling it out anew', async () => {
    await eventually(async () => system.platform.isParked('default', 'idle'), 10_000, 'parked');
    // Parking is reported by a reconcile of its own: its status is settled once that one is done.
    await eventually(
      async () => (await system.functionStatus('idle'))?.phase === 'ScaledToZero',
      10_000,
      'reported parked',
    );
    await system.controller.idle();
    const reconciling = async () =>
      (await system.functionStatus('idle'))?.conditions?.find((c) => c.type === 'Reconciling');
    const before = await reconciling();
    expect(before?.status).toBe('False');
    await system.close();
    system = await startTestSystem({ url: repo.dir, scaleToZeroAfter: '1s', stateDir });
    // Parked from the state directory before any reconcile, with the revision that served.
    expect(system.platform.isParked('default', 'idle')).toBe(true);
    await system.controller.syncNow('default', 'test');
    await system.controller.idle();
    // A rollout would have passed through Deploying (Reconciling True) and back.
    expect(await reconciling()).toEqual(before);
    expect((await system.call('/fn/default/idle')).status).toBe(200);
  });
});

/**
 * A cron Trigger of a function at zero: its run starts the function, as a request to /fn/ does, and
 * is delivered to it (the kube CronJob goes through /fn/ for this; see test/kube/scale-to-zero).
 */
describe('a cron Trigger wakes a function at zero (local)', () => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'sleepy/function.yaml': functionManifest('sleepy', { scaleToZero: { idleSeconds: 1 } }),
      'sleepy/handler.js': nodeHandler(`return { via: event.headers['x-sless-trigger'], body: event.body };`),
    });
    system = await startTestSystem({ url: repo.dir });
    await eventually(
      async () => (await system.functionStatus('sleepy'))?.phase === 'ScaledToZero',
      30_000,
      'sleepy deployed at zero',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it("starts the parked function and delivers the trigger's event to it", async () => {
    expect(system.platform.isParked('default', 'sleepy')).toBe(true);
    expect(system.platform.processId('default', 'sleepy')).toBeUndefined();
    await repo.commit({
      'sleepy/trigger.yaml':
        'apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: wake\nspec: {type: cron, function: sleepy, schedule: "* * * * * *", event: {tick: 1}}\n',
    });
    await system.controller.syncNow('default', 'test');
    const fired = await eventually(
      async () => {
        const t = await system.store.get('Trigger', 'default', 'wake');
        return t?.status?.lastResult ? t : undefined;
      },
      20_000,
      'cron fired',
    );
    expect(fired.status?.lastResult).toBe(`200 ${JSON.stringify({ via: 'wake', body: { tick: 1 } })}`);
    expect(system.platform.processId('default', 'sleepy')).toBeGreaterThan(0);
  });
});
