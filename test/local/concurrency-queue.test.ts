/**
 * `spec.scale.concurrency` and `spec.scale.queue` on the local platform, with real function
 * processes: a handler that blocks until the test opens a gate (a file) shows what the proxy let
 * through, in which order, and what it turned away without asking the function.
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

// Every invocation is written down before it waits, so the test counts what the function saw.
const BLOCKING = nodeHandler(`
  const fs = require('node:fs');
  const path = require('node:path');
  fs.appendFileSync(path.join(process.env.DIR, 'seen'), event.path + '\\n');
  while (!fs.existsSync(path.join(process.env.DIR, 'open'))) await new Promise((r) => setTimeout(r, 20));
  return { path: event.path };
`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each([
  ['the proxy thread', true],
  ['the main thread', false],
])('a concurrency limit with /fn/ from %s', (_how, proxyThread) => {
  let repo: TestRepo;
  let system: TestSystem;
  let dir: string;
  let shortDir: string;

  const seen = async () =>
    existsSync(join(dir, 'seen'))
      ? (await readFile(join(dir, 'seen'), 'utf8')).split('\n').filter(Boolean)
      : [];
  const answer = async (path: string, signal?: AbortSignal) => {
    const started = Date.now();
    const r = await system.call(`/fn/default/gate${path}`, signal ? { signal } : undefined);
    return {
      path,
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      body: (await r.json()) as { path?: string; error?: string },
      ms: Date.now() - started,
      at: Date.now(),
    };
  };

  beforeAll(async () => {
    dir = await tempDir('gate');
    shortDir = await tempDir('gate-short');
    repo = await TestRepo.create({
      'short/function.yaml': functionManifest('short', {
        env: { DIR: shortDir },
        timeoutSec: 1,
        scale: { concurrency: 1, queue: 2 },
      }),
      'short/handler.js': BLOCKING,
      'gate/function.yaml': functionManifest('gate', {
        env: { DIR: dir },
        scale: { concurrency: 1, queue: 2 },
      }),
      'gate/handler.js': BLOCKING,
    });
    system = await startTestSystem({ url: repo.dir, sandbox: 'off', proxyThread });
    for (const name of ['gate', 'short'])
      await eventually(async () => (await system.functionStatus(name))?.phase === 'Ready', 60_000, name);
  });

  afterAll(async () => {
    await writeFile(join(dir, 'open'), '');
    await writeFile(join(shortDir, 'open'), '');
    await system?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
    await rm(shortDir, { recursive: true, force: true });
  });

  it('serves one at a time, queues two in order and turns the rest away at once', async () => {
    const first = answer('/r1');
    await eventually(async () => (await seen()).length === 1, 10_000, 'the first request in flight');
    const queued = [answer('/r2')];
    await sleep(150);
    queued.push(answer('/r3'));
    await sleep(150);
    const overflow = await Promise.all([answer('/x1'), answer('/x2'), answer('/x3')]);
    for (const turned of overflow) {
      expect(turned.status).toBe(503);
      expect(turned.retryAfter).toBe('1');
      expect(turned.body.error).toContain('function default/gate is at its concurrency limit');
      expect(turned.body.error).toContain('2 queued');
      expect(turned.ms).toBeLessThan(1000);
    }
    // The function still serves only the first; the queued two have not reached it.
    await sleep(200);
    expect(await seen()).toEqual(['/r1']);
    const metrics = await (await system.call('/metrics')).text();
    expect(metrics).toContain('sless_proxy_queue_depth{namespace="default",function="gate"} 2');

    await writeFile(join(dir, 'open'), '');
    const served = await Promise.all([first, ...queued]);
    expect(served.map((s) => [s.status, s.body.path])).toEqual([
      [200, '/r1'],
      [200, '/r2'],
      [200, '/r3'],
    ]);
    expect((served[0]?.at ?? 0) <= (served[1]?.at ?? 0) && (served[1]?.at ?? 0) <= (served[2]?.at ?? 0)).toBe(
      true,
    );
    expect(await seen()).toEqual(['/r1', '/r2', '/r3']);
  });

  it('drops a queued request whose client went away', async () => {
    await rm(join(dir, 'open'));
    await rm(join(dir, 'seen'));
    const first = answer('/a1');
    await eventually(async () => (await seen()).length === 1, 10_000, 'the first request in flight');
    const leaving = new AbortController();
    const gone = answer('/gone', leaving.signal).catch((error: Error) => error.name);
    await sleep(150);
    const kept = answer('/a2');
    await sleep(150);
    leaving.abort();
    expect(await gone).toBe('AbortError');
    await sleep(150);
    // Had the abandoned request kept its place, the queue (2) would be full with one more.
    const third = answer('/a3');
    await sleep(150);
    await writeFile(join(dir, 'open'), '');
    const served = await Promise.all([first, kept, third]);
    expect(served.map((s) => [s.status, s.body.path])).toEqual([
      [200, '/a1'],
      [200, '/a2'],
      [200, '/a3'],
    ]);
    expect(await seen()).toEqual(['/a1', '/a2', '/a3']);
  });

  it('answers a request that waited as long as the function may run with a 503, unseen by it', async () => {
    const shortSeen = async () =>
      existsSync(join(shortDir, 'seen'))
        ? (await readFile(join(shortDir, 'seen'), 'utf8')).split('\n').filter(Boolean)
        : [];
    const status = (path: string) => system.call(`/fn/default/short${path}`).then((r) => r.status);
    const first = status('/s1');
    await eventually(async () => (await shortSeen()).length === 1, 10_000, 'the first request in flight');
    // s2 gets the slot when s1 times out (1 s after s1 arrived); s3, queued behind it, waits its 1 s
    // out while s2 runs. s2 is queued 400 ms after s1 arrived so that its own 1 s wait outlasts s1's
    // timeout with room: queued at once, the two ended within a few ms of each other, and on a loaded
    // machine s2 could give up first, s3 take the slot, and end as a 504 instead of the 503.
    await sleep(400);
    const second = status('/s2');
    await sleep(100);
    const started = Date.now();
    const waited = await system.call('/fn/default/short/s3');
    const ms = Date.now() - started;
    expect(waited.status).toBe(503);
    expect(waited.headers.get('retry-after')).toBe('1');
    expect(((await waited.json()) as { error: string }).error).toBe(
      'function default/short had no free instance within 1s (1 in flight at most); try again',
    );
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(1900);
    // The blocked handler outlives its timeout: each admitted request ends with a 504.
    expect([await first, await second]).toEqual([504, 504]);
    expect(await shortSeen()).toEqual(['/s1', '/s2']);
  });
});
