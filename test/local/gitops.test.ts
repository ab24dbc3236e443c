/**
 * The embedded GitOps loop end to end: a real git repository made with the git CLI, real builds,
 * real runtime processes and the real HTTP proxy. What every platform does (serving a pushed
 * function, env-only and code commits, failed builds, deletion) is the platform contract's
 * (test/platform/); this file keeps what it does not check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('local GitOps loop', () => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'one' } }),
      'alpha/handler.js': nodeHandler(`return { fn: 'alpha', word: process.env.WORD, v: 1 };`),
      'beta/function.yaml': functionManifest('beta'),
      'beta/handler.js': nodeHandler(`return { fn: 'beta', v: 1 };`),
      'unrelated/config.yaml': 'just: some yaml\n',
    });
    system = await startTestSystem({ url: repo.dir });
    await eventually(
      async () =>
        (await system.functionStatus('alpha'))?.phase === 'Ready' &&
        (await system.functionStatus('beta'))?.phase === 'Ready',
      30_000,
      'both functions ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('a new revision that fails to start: the old one keeps serving, the Function is not Ready and says why; a fix makes it Ready', async () => {
    const good = await system.functionStatus('alpha');
    const oldBody = (await bodyOf(system, '/fn/default/alpha')).text;
    expect(JSON.parse(oldBody)).toMatchObject({ fn: 'alpha', v: 1 });
    // Every Ready the controller writes for alpha from here on, retries included.
    const written: string[] = [];
    const unsubscribe = system.store.subscribe((event) => {
      if (event.object.kind !== 'Function' || event.object.metadata.name !== 'alpha') return;
      const ready = event.object.status?.conditions?.find((c) => c.type === 'Ready');
      if (ready && written.at(-1) !== `${ready.status} ${ready.reason}`)
        written.push(`${ready.status} ${ready.reason}`);
    });
    try {
      await repo.commit({
        'alpha/handler.js': `throw new Error('no config at start');\n${nodeHandler('return 0;')}`,
      });
      const failed = await eventually(
        async () => {
          const s = await system.functionStatus('alpha');
          const ready = s?.conditions?.find((c) => c.type === 'Ready');
          return s && ready?.reason === 'RolloutFailed' ? { s, ready } : undefined;
        },
        30_000,
        'alpha RolloutFailed',
      );
      expect(failed.ready.status).toBe('False');
      expect(failed.s.phase).toBe('Failed');
      expect(failed.ready.message).toContain('no config at start');
      expect(failed.ready.message).toContain(`still serving ${good?.servingRevision}`);
      expect(failed.s.servingRevision).toBe(good?.servingRevision);
      expect((await bodyOf(system, '/fn/default/alpha')).text).toBe(oldBody);
      // The controller retries the failed start (with backoff): once it has, twice over, no write
      // in between said Ready while the old code served.
      await eventually(
        async () => written.filter((w) => w === 'False RolloutFailed').length >= 3,
        30_000,
        'two retries of the failed start',
      );
      const afterFailure = written.slice(written.indexOf('False RolloutFailed'));
      expect(afterFailure).toContain('False Deploying');
      expect(afterFailure.filter((w) => w.startsWith('True'))).toEqual([]);
    } finally {
      unsubscribe();
    }

    const fix = await repo.commit({
      'alpha/handler.js': nodeHandler(`return { fn: 'alpha', word: process.env.WORD, v: 2 };`),
    });
    const fixed = await eventually(
      async () => {
        const s = await system.functionStatus('alpha');
        return s?.phase === 'Ready' && s.commit === fix ? s : undefined;
      },
      30_000,
      'alpha Ready again',
    );
    expect(fixed.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Serving',
    });
    expect(fixed.servingRevision).not.toBe(good?.servingRevision);
    expect(JSON.parse((await bodyOf(system, '/fn/default/alpha')).text)).toEqual({
      ...JSON.parse(oldBody),
      v: 2,
    });
  });

  it('keeps serving the last good revision when a commit has an invalid manifest, and names file and field', async () => {
    const good = await system.sourceStatus();
    await repo.commit({ 'beta/function.yaml': functionManifest('beta', { memoryMb: 999999 }) });
    const status = await eventually(
      async () => {
        const s = await system.sourceStatus();
        return s?.conditions?.find((c) => c.type === 'Ready' && c.status === 'False') ? s : undefined;
      },
      20_000,
      'source rejected',
    );
    const ready = status.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.reason).toBe('ValidationFailed');
    expect(ready?.message).toContain('beta/function.yaml#0 spec.memoryMb: must be <= 4096');
    expect(status.lastSyncedCommit).toBe(good?.lastSyncedCommit);
    expect((await bodyOf(system, '/fn/default/beta')).status).toBe(200);
    expect((await system.store.get('Function', 'default', 'beta'))?.spec).not.toHaveProperty(
      'memoryMb',
      999999,
    );
    // Fixing the manifest in a later commit recovers.
    await repo.commit({ 'beta/function.yaml': functionManifest('beta') });
    await eventually(
      async () =>
        (await system.sourceStatus())?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
      20_000,
      'source recovered',
    );
  });

  it('keeps the previous revision when a dependency install fails, with the log tail in status', async () => {
    await repo.commit({
      'beta/package.json': '{ "name": "beta", "dependencies": { "left-pad": ', // broken JSON: npm fails at once
      'beta/handler.js': nodeHandler(`return { fn: 'beta', v: 3 };`),
    });
    const status = await eventually(
      async () => {
        const s = await system.functionStatus('beta');
        return s?.lastBuild?.result === 'Failed' ? s : undefined;
      },
      30_000,
      'failed build',
    );
    expect(status.phase).toBe('Failed');
    expect(status.lastBuild?.message).toMatch(/npm install failed/);
    expect(status.lastBuild?.logTail).toMatch(/JSON|EJSONPARSE/i);
    expect(status.conditions?.find((c) => c.type === 'Ready')?.message).toContain('still serving');
    expect(JSON.parse((await bodyOf(system, '/fn/default/beta')).text)).toEqual({ fn: 'beta', v: 1 });
  });

  it('shows a runtime start-up error (missing module) in function status', async () => {
    await repo.commit({
      'broken/function.yaml': functionManifest('broken', { entrypoint: 'missing.handle' }),
      'broken/handler.js': nodeHandler('return 1;'),
    });
    const status = await eventually(
      async () => {
        const s = await system.functionStatus('broken');
        return s?.phase === 'Failed' ? s : undefined;
      },
      20_000,
      'broken failed',
    );
    const ready = status.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.reason).toBe('RolloutFailed');
    expect(status.lastError).toContain('cannot load entrypoint "missing.handle": module "missing" not found');
    const response = await bodyOf(system, '/fn/default/broken');
    expect(response.status).toBe(503);
    await repo.commit({ broken: null });
    await eventually(
      async () => (await bodyOf(system, '/fn/default/broken')).status === 404,
      20_000,
      'broken removed',
    );
  });

  it('lists functions and sources through the status API', async () => {
    const functions = (await (await system.call('/v1/namespaces/default/functions')).json()) as {
      items: { metadata: { name: string }; status: { phase: string } }[];
    };
    expect(functions.items.map((f) => f.metadata.name)).toEqual(['alpha', 'beta']);
    expect(functions.items[0]?.status.phase).toBe('Ready');
    const sources = (await (await system.call('/v1/namespaces/default/sources')).json()) as {
      items: { status: { lastSyncedCommit: string } }[];
    };
    expect(sources.items[0]?.status.lastSyncedCommit).toMatch(/^[0-9a-f]{40}$/);
    expect((await system.call('/v1/namespaces/default/functions/nope')).status).toBe(404);
  });
});
