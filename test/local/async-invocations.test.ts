/**
 * Asynchronous invocation end to end against the real `sless dev` process: a thousand invocations
 * of a function that fails 30% of the time at random each end succeeded or dead-lettered, none lost
 * and none succeeding twice, with and without a kill -9 in the middle; a callback to loopback is
 * refused before anything is stored. A single invocation's attempts (a 4xx final, a 5xx retried to
 * its budget, a replay) are the platform contract's 'async' case (test/platform).
 */
import { rm } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { InvocationAttempt, InvocationState } from '../../src/core/invocations.js';
import { freePort } from '../../src/platform/local/ports.js';
import { expectCallbackRefused, withCallback } from '../helpers/async-callbacks.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { pollUntil } from '../helpers/poll-until.js';
import { SlessProcess } from '../helpers/sless-process.js';

const API = '/v1/namespaces/default';

interface View {
  id: string;
  state: InvocationState;
  attempts: InvocationAttempt[];
  result?: { status: number; body: string };
}

const FLAKY = nodeHandler(`
  const id = event.headers['x-sless-invocation-id'];
  if (Math.random() < 0.3) return { statusCode: 500, body: { failed: id } };
  return { statusCode: 200, body: { id, attempt: event.headers['x-sless-attempt'] } };
`);

describe('asynchronous invocations on the local platform', { timeout: 6 * 60_000 }, () => {
  let repo: TestRepo;
  let stateDir: string;
  let port: number;
  let sless: SlessProcess | undefined;

  const start = async () => {
    // No loopback allowance: the callback guard is what the test checks (the repository is a path).
    sless = await SlessProcess.start({
      repo: repo.dir,
      stateDir,
      port,
      env: { SLESS_OUTBOUND_ALLOW: '' },
    });
    return sless;
  };
  const call = (path: string, init?: RequestInit) => {
    if (!sless) throw new Error('sless is not running');
    return sless.call(path, init);
  };
  const list = async (state: InvocationState): Promise<View[]> => {
    const response = await call(`${API}/invocations?state=${state}&limit=1000`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { items: View[] }).items;
  };
  const settledAll = () =>
    pollUntil(
      'every invocation ended',
      async () => (await list('queued')).length === 0 && (await list('running')).length === 0,
      120_000,
      200,
    ).catch(async (error) => {
      const open = [...(await list('queued')), ...(await list('running'))].slice(0, 3);
      process.stderr.write(`invocations not ended: ${JSON.stringify(open)}\n`);
      throw error;
    });

  beforeAll(async () => {
    repo = await TestRepo.create({
      'flaky/function.yaml': functionManifest('flaky', {
        async: { maxAttempts: 3, backoffMs: 20, concurrency: 16 },
      }),
      'flaky/handler.js': FLAKY,
      'teapot/function.yaml': functionManifest('teapot', { async: { maxAttempts: 5, backoffMs: 10 } }),
      'teapot/handler.js': nodeHandler(`return { statusCode: 418, body: { short: 'and stout' } };`),
    });
    stateDir = await tempDir('async-state');
    port = await freePort();
    await start();
    await sless?.settled();
  });

  afterEach(({ task }) => {
    if (task.result?.state === 'fail' && sless)
      process.stderr.write(`--- last log lines of sless dev ---\n${sless.tail()}\n`);
  });

  afterAll(async () => {
    await sless?.stop('SIGKILL');
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  /** Posts until it gets its 202 (a connection refused while sless restarts is tried again). */
  const enqueue = async (index: number): Promise<string> => {
    for (;;) {
      const viaPrefer = index % 2 === 0;
      const response = await call(viaPrefer ? '/fn/default/flaky/work' : '/fn-async/default/flaky/work', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(viaPrefer ? { prefer: 'respond-async' } : {}) },
        body: JSON.stringify({ index }),
      }).catch(() => undefined);
      if (response?.status === 202) {
        const body = (await response.json()) as { id: string; location: string };
        expect(response.headers.get('location')).toBe(`${API}/invocations/${body.id}`);
        expect(body.location).toBe(`${API}/invocations/${body.id}`);
        return body.id;
      }
      // While sless stops (SIGTERM) it refuses new invocations with 429 or 503: the client tries again.
      if (response && response.status !== 429 && response.status !== 503)
        throw new Error(`enqueue ${index}: ${response.status} ${await response.text()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  const enqueueAll = async (count: number, onAccepted?: (accepted: number) => void): Promise<string[]> => {
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < count) {
          const index = next++;
          ids.push(await enqueue(index));
          onAccepted?.(ids.length);
        }
      }),
    );
    return ids;
  };

  /** Every accepted id ended exactly once, succeeded at most once, and dead letters used every attempt. */
  const expectAccounted = async (ids: string[]) => {
    await settledAll();
    const succeeded = await list('succeeded');
    const dead = await list('dead-lettered');
    const failed = await list('failed');
    const ended = new Map<string, View>();
    for (const view of [...succeeded, ...dead]) {
      expect(ended.has(view.id)).toBe(false);
      ended.set(view.id, view);
    }
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(ended.get(id)?.id, `invocation ${id} was lost`).toBe(id);
    expect(failed.filter((v) => ids.includes(v.id))).toEqual([]);
    for (const view of ended.values()) {
      const successes = view.attempts.filter((a) => a.status !== undefined && a.status < 300);
      const counted = view.attempts.filter((a) => !a.interrupted);
      if (view.state === 'succeeded') {
        expect(successes).toHaveLength(1);
        expect(counted.at(-1)?.status).toBe(200);
        expect(JSON.parse(view.result?.body ?? '{}').id).toBe(view.id);
      } else {
        expect(successes).toHaveLength(0);
        expect(counted).toHaveLength(3);
        expect(counted.every((a) => a.status === 500)).toBe(true);
      }
    }
    return { succeeded: succeeded.length, dead: dead.length };
  };

  it('1,000 invocations of a function failing 30% of the time: each ends succeeded or dead-lettered, once', async () => {
    const ids = await enqueueAll(1000);
    const counts = await expectAccounted(ids);
    expect(counts.succeeded + counts.dead).toBe(1000);
    // 0.3³ of them fail three times: 27 expected; both outcomes must occur.
    expect(counts.dead).toBeGreaterThan(0);
    expect(counts.succeeded).toBeGreaterThan(900);
    // Retries happened: some succeeded invocation needed more than one attempt.
    const succeeded = await list('succeeded');
    expect(succeeded.some((v) => v.attempts.length > 1)).toBe(true);
  });

  it.each(['SIGKILL', 'SIGTERM'] as const)(
    'a %s while invocations are accepted and delivered loses none and succeeds none twice',
    async (signal) => {
      const before = new Set(
        [...(await list('succeeded')), ...(await list('dead-lettered'))].map((v) => v.id),
      );
      let killed: Promise<void> | undefined;
      const ids = await enqueueAll(1000, (accepted) => {
        if (accepted === 400 && !killed)
          killed = (async () => {
            // Deliveries are under way when it stops, not only accepts.
            await pollUntil('attempts running', async () => (await list('running')).length > 0, 30_000, 5);
            const [code] = (await sless?.stop(signal)) ?? [];
            if (signal === 'SIGTERM') expect(code).toBe(0);
            await start();
          })();
      });
      await killed;
      expect(killed).toBeDefined();
      // The list API pages at 1000: the first run's records go first.
      await settledAll();
      const fresh = async (state: InvocationState) => (await list(state)).filter((v) => !before.has(v.id));
      const ended = [...(await fresh('succeeded')), ...(await fresh('dead-lettered'))];
      const byId = new Map(ended.map((v) => [v.id, v]));
      for (const id of ids) expect(byId.get(id)?.id, `invocation ${id} was lost`).toBe(id);
      // Records whose 202 the kill cut off may exist beyond the accepted ones, at most one per poster.
      expect(ended.length - ids.length).toBeLessThanOrEqual(16);
      for (const view of ended) {
        const successes = view.attempts.filter((a) => a.status !== undefined && a.status < 300);
        expect(successes.length, JSON.stringify(view)).toBeLessThanOrEqual(1);
        expect(successes.length === 1).toBe(view.state === 'succeeded');
        // The kill cut attempts in flight: they are recorded, and do not count against the budget.
        if (view.state === 'dead-lettered')
          expect(view.attempts.filter((a) => !a.interrupted)).toHaveLength(3);
      }
    },
  );

  it.each([
    'http://127.0.0.1:9/result',
    'http://localhost:9/result',
    'http://[::1]:9/result',
    'http://169.254.169.254/latest',
  ])('a callback to %s is refused with a 400 before anything is stored', async (callback) => {
    const count = async () =>
      (await Promise.all((['queued', 'running', 'succeeded', 'failed', 'dead-lettered'] as const).map(list)))
        .flat()
        .filter((v) => v.attempts !== undefined).length;
    const before = await count();
    await expectCallbackRefused(await call('/fn-async/default/teapot', withCallback(callback)));
    expect(await count()).toBe(before);
  });

  it('an unknown function is a 404, and nothing is stored for it', async () => {
    const response = await call('/fn-async/default/nobody', { method: 'POST', body: 'x' });
    expect(response.status).toBe(404);
    const missing = await call(`${API}/invocations/00000000-0000-0000-0000-000000000000`);
    expect(missing.status).toBe(404);
  });
});
