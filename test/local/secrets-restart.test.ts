/**
 * The local secrets store survives a restart: sless serves a function with secrets from its builds
 * again, values read from the sealed store, without anyone setting them again.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const VALUE = `restart_${randomBytes(12).toString('hex')}`;

describe('local secrets across a restart', () => {
  let repo: TestRepo;
  let system: TestSystem | undefined;
  let stateDir: string;

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('serves the function with its secret again after a restart, from the sealed store', async () => {
    repo = await TestRepo.create({
      'pay/function.yaml': functionManifest('pay', {
        env: { STRIPE: { secretRef: { name: 'payments', key: 'stripe' } } },
      }),
      'pay/handler.js': nodeHandler('return { env: process.env.STRIPE ?? null };'),
    });
    stateDir = await tempDir('secrets-restart');
    system = await startTestSystem({ url: repo.dir, stateDir });
    const put = await system.call('/v1/namespaces/default/secrets/payments', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stringData: { stripe: VALUE } }),
    });
    expect(put.status).toBe(201);
    await eventually(async () => (await system?.functionStatus('pay'))?.phase === 'Ready', 60_000, 'Ready');
    expect(await (await system.call('/fn/default/pay')).json()).toEqual({ env: VALUE });
    const revision = (await system.functionStatus('pay'))?.servingRevision;
    await system.close();
    system = await startTestSystem({ url: repo.dir, stateDir });
    expect(await (await system.call('/fn/default/pay')).json()).toEqual({ env: VALUE });
    await eventually(
      async () => (await system?.functionStatus('pay'))?.phase === 'Ready',
      60_000,
      'Ready again',
    );
    // The same values: the same revision, no rollout after the restart.
    expect((await system.functionStatus('pay'))?.servingRevision).toBe(revision);
  }, 120_000);
});
