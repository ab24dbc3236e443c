/**
 * `spec.scale` on the local platform, in what only it shows: each instance of the serving revision is
 * a process of its own, and a new request goes to the least busy one. A handler blocks until the test
 * opens a gate (a file), so what is in flight is exact. Scaling out to the load, no further than max,
 * and back to min after are the platform contract's (test/platform/contract.ts), on both platforms.
 */
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem, untilInstances } from '../helpers/local-system.js';

// Each process has an id of its own, so the test sees which instance answered.
const HELD = nodeHandler(`
  const fs = require('node:fs');
  const path = require('node:path');
  globalThis.instance ??= Math.random().toString(36).slice(2);
  // Each request marks its arrival, so the test opens the gate only once every request is held.
  fs.writeFileSync(path.join(process.env.DIR, 'held-' + Math.random().toString(36).slice(2)), globalThis.instance);
  while (!fs.existsSync(path.join(process.env.DIR, 'open'))) await new Promise((r) => setTimeout(r, 20));
  return { instance: globalThis.instance };
`);

describe('autoscaling on the local platform', () => {
  let repo: TestRepo;
  let system: TestSystem;
  let dir: string;

  beforeAll(async () => {
    dir = await tempDir('scale');
    repo = await TestRepo.create({
      'busy/function.yaml': functionManifest('busy', {
        env: { DIR: dir },
        scale: { min: 1, max: 3, target: 1, stableWindowSec: 6 },
      }),
      'busy/handler.js': HELD,
    });
    system = await startTestSystem({ url: repo.dir, sandbox: 'off', proxyThread: true });
    await eventually(async () => (await system.functionStatus('busy'))?.phase === 'Ready', 60_000, 'Ready');
  });

  afterAll(async () => {
    await writeFile(join(dir, 'open'), '');
    await system?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  const call = async () => {
    const r = await system.call('/fn/default/busy/');
    return { status: r.status, body: (await r.json()) as { instance?: string } };
  };
  const instances = async () => (await system.functionStatus('busy'))?.instances;
  const held = async () => (await readdir(dir)).filter((f) => f.startsWith('held-')).length;

  it('each instance is a process of its own, and new requests go to the least busy', async () => {
    expect(await instances()).toEqual({ desired: 1, ready: 1 });
    const first = Array.from({ length: 3 }, () => call());
    // Three in flight at target 1: three instances, each a process of its own.
    await untilInstances(system, 'busy', 3);
    // New requests go to the least busy instances: the two new ones, which hold nothing yet.
    const more = Array.from({ length: 2 }, () => call());
    // Five in flight at max 3: still three. The gate opens only once all five are inside a handler;
    // opened earlier, the first three could finish before the last two are placed.
    await eventually(async () => (await held()) === 5, 15_000, 'five requests held');
    expect(await instances()).toEqual({ desired: 3, ready: 3 });
    await writeFile(join(dir, 'open'), '');
    const answers = await Promise.all([...first, ...more]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    const served = new Set(answers.map((a) => a.body.instance));
    expect(served.size).toBe(3);
  }, 90_000);
});
