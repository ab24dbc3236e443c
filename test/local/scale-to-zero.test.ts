/** Opt-in scale to zero on the local platform, with a real runtime process. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
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
    await eventually(
      async () => (await system.functionStatus('lazy'))?.phase === 'Ready',
      30_000,
      'lazy ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('stops the process after idleSeconds and holds the next requests until it is back', async () => {
    const first = (await (await system.call('/fn/default/lazy')).json()) as { instance: string };
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
    // Concurrent requests while parked: all wait for one start, none fails.
    const responses = await Promise.all(Array.from({ length: 5 }, () => system.call('/fn/default/lazy')));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const instances = new Set(
      await Promise.all(responses.map(async (r) => ((await r.json()) as { instance: string }).instance)),
    );
    expect(instances.size).toBe(1);
    expect(instances.has(first.instance)).toBe(false);
    expect(system.platform.isParked('default', 'lazy')).toBe(false);
    expect((await system.functionStatus('lazy'))?.phase).toBe('Ready');
  });
});
