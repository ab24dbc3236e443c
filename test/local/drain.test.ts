/**
 * A rollout lets requests in flight on the old revision finish there, however `/fn/` is served: the
 * proxy thread counts them on the shared board, and the platform waits for that count. The runtime
 * itself lets requests finish for only 2 s after SIGTERM, so a request that needs longer tells a
 * drain that waited from one that did not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const SLOW = nodeHandler(`
  if (event.path === '/slow') {
    console.log('slow request started');
    await new Promise((resolve) => setTimeout(resolve, 4000));
  }
  return { version: process.env.VERSION ?? 'v1' };
`);

describe.each([
  ['the proxy thread', true],
  ['the main thread', false],
])('a rollout with /fn/ from %s', (_how, proxyThread) => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'slow/function.yaml': functionManifest('slow', { timeoutSec: 10 }),
      'slow/handler.js': SLOW,
    });
    system = await startTestSystem({ url: repo.dir, proxyThread });
    await eventually(async () => (await system.functionStatus('slow'))?.phase === 'Ready', 30_000, 'ready');
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('lets a request in flight on the old revision finish there', async () => {
    const slow = system.call('/fn/default/slow/slow').then(async (r) => [r.status, await r.json()]);
    await eventually(
      async () =>
        (await (await system.call('/v1/namespaces/default/functions/slow/logs')).text()).includes(
          'slow request started',
        ),
      10_000,
      'the slow request reached the function',
    );
    await repo.commit({
      'slow/function.yaml': functionManifest('slow', { timeoutSec: 10, env: { VERSION: 'v2' } }),
    });
    await eventually(
      async () =>
        ((await (await system.call('/fn/default/slow')).json()) as { version: string }).version === 'v2',
      20_000,
      'v2 serves',
    );
    expect(await slow).toEqual([200, { version: 'v1' }]);
  });
});
