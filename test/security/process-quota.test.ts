/**
 * The process quota (SLESS_QUOTA_PROCESSES) on the real local system, at its edge: a namespace at
 * exactly its limit runs what it has, counts every replica, lets a running function change without
 * counting it twice, and gives a deleted function's processes to the function it refused, at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

let repo: TestRepo;
let system: TestSystem;

const fn = (name: string, spec: Record<string, unknown> = {}) => ({
  [`${name}/function.yaml`]: functionManifest(name, spec),
  [`${name}/handler.js`]: nodeHandler(`return '${name} ' + (process.env.VERSION ?? 'v1');`),
});

const refusal = (s: FunctionStatus | undefined) =>
  s?.conditions?.some((c) => c.reason === 'QuotaExceeded') ? s : undefined;

beforeAll(async () => {
  // One function of one replica and one of two: the namespace's 3 processes, exactly.
  repo = await TestRepo.create({ ...fn('one'), ...fn('pair', { replicas: 2 }) });
  system = await startTestSystem({ url: repo.dir, env: { SLESS_QUOTA_PROCESSES: '3' } });
  await eventually(
    async () =>
      (await bodyOf(system, '/fn/default/one')).text === '"one v1"' &&
      (await bodyOf(system, '/fn/default/pair')).text === '"pair v1"',
    60_000,
    'both functions serving',
  );
}, 120_000);

afterAll(async () => {
  await system?.close();
  await repo?.remove();
});

describe('the process quota at its limit', () => {
  test('a namespace may use all of its processes, replicas counted: a fourth is built but not started', async () => {
    // Both run: one process and two, all three the namespace has.
    await eventually(
      async () =>
        (await system.functionStatus('one'))?.phase === 'Ready' &&
        (await system.functionStatus('pair'))?.phase === 'Ready',
      60_000,
      'both Ready',
    );
    await repo.commit(fn('late'));
    await system.controller.syncNow('default', 'test');
    const late = await eventually(
      async () => refusal(await system.functionStatus('late')),
      60_000,
      'refusal',
    );
    expect(late.lastError).toBe(
      'namespace default already runs 3 of its 3 processes; this function needs 1 (quota SLESS_QUOTA_PROCESSES)',
    );
    expect(late.lastBuild?.result).toBe('Succeeded');
    expect((await bodyOf(system, '/fn/default/late')).status).not.toBe(200);
  });

  test('a running function at the limit may change: its own processes are not counted twice', async () => {
    await repo.commit(fn('one', { env: { VERSION: 'v2' } }));
    await system.controller.syncNow('default', 'test');
    await eventually(
      async () => (await bodyOf(system, '/fn/default/one')).text === '"one v2"',
      60_000,
      'the new revision of one',
    );
    expect(refusal(await system.functionStatus('one'))).toBeUndefined();
    expect((await bodyOf(system, '/fn/default/pair')).text).toBe('"pair v1"');
  });

  test("a deleted function's processes go to the function that was refused", async () => {
    await repo.commit({ 'pair/function.yaml': null, 'pair/handler.js': null });
    await system.controller.syncNow('default', 'test');
    await eventually(
      async () => (await bodyOf(system, '/fn/default/pair')).status === 404,
      30_000,
      'pair gone',
    );
    // No commit of its own: the room given back starts the function that was refused.
    await eventually(
      async () => (await bodyOf(system, '/fn/default/late')).text === '"late v1"',
      40_000,
      'late serving once pair is gone',
    );
    expect(refusal(await system.functionStatus('late'))).toBeUndefined();
    expect((await bodyOf(system, '/fn/default/one')).text).toBe('"one v2"');
  });
});
