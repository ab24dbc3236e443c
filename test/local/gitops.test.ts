/**
 * The embedded GitOps loop end to end: a real git repository made with the git CLI, real builds,
 * real runtime processes and the real HTTP proxy. What every platform does (serving a pushed
 * function, env-only and code commits, failed builds and rollouts, invalid manifests, deletion) is
 * the platform contract's (test/platform/); this file keeps what only the local platform does: its
 * own retries of a revision that fails to start, the install log in status, the runtime's own
 * start-up error, and the status API listing.
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

  // Local only: here the controller itself restarts a revision that fails to start, with backoff; on
  // kube that is the kubelet's CrashLoopBackOff, and the contract's 'rollout-fails' checks what both
  // show (RolloutFailed, the old revision serving, a fix serving).
  it('a revision that fails to start is retried with backoff, and no write in between says Ready', async () => {
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
    // A fix serves again (the cases below read alpha Ready).
    const fix = await repo.commit({
      'alpha/handler.js': nodeHandler(`return { fn: 'alpha', word: process.env.WORD, v: 2 };`),
    });
    await eventually(
      async () => {
        const s = await system.functionStatus('alpha');
        return s?.phase === 'Ready' && s.commit === fix;
      },
      30_000,
      'alpha Ready again',
    );
  });

  // Local only: the local builder keeps the tail of npm's output in status; kube's kaniko log is not
  // there to read in these tests. The contract's 'build-fails' checks the rest (BuildFailed, Stalled,
  // the previous revision serving).
  it('a failed dependency install leaves the log tail in status', async () => {
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
    expect(status.lastBuild?.message).toMatch(/npm install failed/);
    expect(status.lastBuild?.logTail).toMatch(/JSON|EJSONPARSE/i);
  });

  // Local only: the runtime process reports why it cannot load the entrypoint; a kube pod would be in
  // CrashLoopBackOff, which the contract's 'rollout-fails' covers.
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

  // The status API's listing of this system's objects (kube's own listing is kubectl's Table view).
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
