/**
 * Claims docs/api.md and the README make, each checked over real HTTP: the API app listening on a
 * loopback port (with the in-memory store and a recording stand-in for the controller, as in
 * harness.ts), and a real local system where the claim is about startup.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadLocalConfig } from '../../src/config/config.js';
import { LABEL_SOURCE } from '../../src/core/resources.js';
import { createLogger, startLocalSystem } from '../../src/main.js';
import { tempDir } from '../helpers/git.js';
import { fn, type Harness, startHarness } from './harness.js';

let h: Harness;
let base: string;
let ready = false;

beforeAll(async () => {
  h = await startHarness({ isReady: () => ready });
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => h.close());

const json = { 'content-type': 'application/json' };

describe('documented API claims', () => {
  test('GET /readyz answers 503 until the system is ready, then 200; /healthz is 200 throughout', async () => {
    ready = false;
    const before = await fetch(`${base}/readyz`);
    expect(before.status).toBe(503);
    expect(await before.json()).toEqual({ error: 'not ready' });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
  });

  test('POST …/functions/{name}/rebuild: 202 and a retry asked of the controller; 404 for an unknown function', async () => {
    await h.store.apply(fn('default', 'hello'));
    const accepted = await fetch(`${base}/v1/namespaces/default/functions/hello/rebuild`, { method: 'POST' });
    expect(accepted.status).toBe(202);
    expect(h.rebuilds).toEqual([{ namespace: 'default', name: 'hello' }]);
    const unknown = await fetch(`${base}/v1/namespaces/default/functions/ghost/rebuild`, { method: 'POST' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: expect.stringContaining('ghost') });
    expect(h.rebuilds).toHaveLength(1);
  });

  test('DELETE …/jobs/{name}: 204 for an API job, 409 for one a GitSource manages, 404 when absent', async () => {
    await h.store.apply(fn('default', 'hello'));
    const created = await fetch(`${base}/v1/namespaces/default/jobs`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'by-api', spec: { function: 'hello', runId: 1 } }),
    });
    expect(created.status).toBe(201);
    const deleted = await fetch(`${base}/v1/namespaces/default/jobs/by-api`, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect(await h.store.get('FunctionJob', 'default', 'by-api')).toBeUndefined();

    await h.store.apply({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'FunctionJob',
      metadata: { name: 'from-git', namespace: 'default', labels: { [LABEL_SOURCE]: 'repo' } },
      spec: { function: 'hello', runId: 1 },
    });
    const refused = await fetch(`${base}/v1/namespaces/default/jobs/from-git`, { method: 'DELETE' });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toEqual({ error: expect.stringContaining('managed by GitSource repo') });
    expect(await h.store.get('FunctionJob', 'default', 'from-git')).toBeDefined();
    const overwrite = await fetch(`${base}/v1/namespaces/default/jobs`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'from-git', spec: { function: 'hello', runId: 2 } }),
    });
    expect(overwrite.status).toBe(409);
    expect((await fetch(`${base}/v1/namespaces/default/jobs/nothing`, { method: 'DELETE' })).status).toBe(
      404,
    );
  });

  test('timeoutSec is bounded 1..900 and never clamped; a GitSource gets the default interval 1m', async () => {
    await h.store.apply(fn('default', 'hello'));
    const post = (body: unknown) =>
      fetch(`${base}/v1/namespaces/default/validate`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify(body),
      });
    const function_ = (timeoutSec: number) => ({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name: 'f' },
      spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', timeoutSec },
    });
    for (const [value, error] of [
      [0, 'spec.timeoutSec: must be >= 1'],
      [901, 'spec.timeoutSec: must be <= 900'],
    ] as const) {
      const response = await post(function_(value));
      expect(response.status, String(value)).toBe(400);
      expect(await response.json()).toEqual({ error: error });
    }
    for (const value of [1, 900]) expect((await post(function_(value))).status, String(value)).toBe(200);

    const registered = await fetch(`${base}/v1/namespaces/default/sources`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'plain', spec: { url: 'https://git.example.com/r.git' } }),
    });
    expect(registered.status).toBe(201);
    expect(((await registered.json()) as { spec: { interval: string } }).spec.interval).toBe('1m');
  });
});

describe('local mode without auth', () => {
  test('startup logs a loud warning, and /v1 is open to every caller as an admin', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const config = loadLocalConfig({ port: '0', 'state-dir': await tempDir('noauth') }, {});
    expect(config.authDisabled).toBe(true);
    const system = await startLocalSystem(config, {
      logger: createLogger({ logLevel: 'info', prettyLogs: false }, sink),
    });
    try {
      const warning = lines
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .find((entry) => entry.msg.startsWith('AUTHENTICATION IS OFF'));
      expect(warning?.level).toBe(40);
      expect(warning?.msg).toContain('may use /v1 as an admin');
      expect((await fetch(`${system.url}/v1/namespaces/default/sources`)).status).toBe(200);
      const ensured = await fetch(`${system.url}/v1/namespaces/anything/ensure`, { method: 'POST' });
      expect(ensured.status).toBe(201);
    } finally {
      await system.stop();
    }
  });
});
