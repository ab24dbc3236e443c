/**
 * The /fn/ proxy against real runtime processes: errors, timeouts, headers, crashes and a redeploy
 * under load.
 */
import { request as httpRequest } from 'node:http';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const ECHO = nodeHandler(`
  if (event.path === '/throw') throw new Error('handler exploded');
  if (event.path === '/slow') { await new Promise((r) => setTimeout(r, 15000)); return 'late'; }
  if (event.path === '/crash') { setTimeout(() => process.exit(7), 5); return 'bye'; }
  if (event.path === '/hop') return { statusCode: 200, headers: { 'proxy-authenticate': 'Basic realm="x"', 'x-kept': 'yes' }, body: 'ok' };
  return { version: process.env.VERSION ?? 'v1', method: event.method, path: event.path, query: event.query, headers: event.headers, body: event.body };
`);

// A handler that holds its runtime's event loop: the runtime's own timeout cannot answer for it, so
// only the proxy's can. It lets go after 8 s, so that a run without the proxy's timeout fails in
// seconds rather than waiting for undici's default (300 s).
const SPIN = nodeHandler(`
  const until = Date.now() + 8000;
  while (Date.now() < until) {}
  return 'spun';
`);

// Both ways `/fn/` is served: from the proxy thread (`sless dev`'s default) and from the main thread.
describe.each([
  ['the proxy thread', true],
  ['the main thread', false],
])('/fn/ proxy from %s', (_how, proxyThread) => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'echo/function.yaml': functionManifest('echo', { timeoutSec: 1 }),
      'echo/handler.js': ECHO,
      'spin/function.yaml': functionManifest('spin', { timeoutSec: 1 }),
      'spin/handler.js': SPIN,
    });
    system = await startTestSystem({ url: repo.dir, proxyThread });
    await eventually(
      async () =>
        (await system.functionStatus('echo'))?.phase === 'Ready' &&
        (await system.functionStatus('spin'))?.phase === 'Ready',
      30_000,
      'echo and spin ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('passes method, sub-path, query and a JSON body to the handler', async () => {
    const response = await system.call('/fn/default/echo/items/42?tag=a&tag=b&x=1', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ hello: 'world' }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      method: 'POST',
      path: '/items/42',
      query: { tag: ['a', 'b'], x: '1' },
      body: { hello: 'world' },
    });
  });

  it('serves the same proxy through fastify routes (app.inject), not only on the server fast path', async () => {
    const response = await system.app.inject({
      method: 'POST',
      url: '/fn/default/echo/via-inject?k=v',
      payload: { through: 'fastify' },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      method: 'POST',
      path: '/via-inject',
      query: { k: 'v' },
      body: { through: 'fastify' },
    });
    const unknown = await system.app.inject({ url: '/fn/default/nope' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'unknown function default/nope' });
  });

  it('counts proxied requests in /metrics by function and status code', async () => {
    await (await system.call('/fn/default/echo/metrics-check')).text();
    await (await system.call('/fn/default/echo/throw')).text();
    const text = await (await system.call('/metrics')).text();
    const count = (code: number) =>
      Number(
        new RegExp(
          `sless_proxy_requests_total\\{namespace="default",function="echo",code="${code}"\\} (\\d+)`,
        ).exec(text)?.[1] ?? 0,
      );
    expect(count(200)).toBeGreaterThanOrEqual(1);
    expect(count(500)).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/sless_proxy_request_duration_seconds_bucket\{[^}]*function="echo"/);
  });

  it('answers 404 JSON for an unknown function', async () => {
    const response = await system.call('/fn/default/nope');
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: 'unknown function default/nope' });
    for (const path of ['/fn/default', '/fn/Bad_Name/x', '/fn/default/echoX%2F..']) {
      const bad = await system.call(path);
      expect(bad.status, path).toBe(404);
      expect(((await bad.json()) as { error: string }).error, path).toMatch(/^unknown function /);
    }
  });

  it('turns a thrown error into 500 JSON, and the function keeps serving', async () => {
    const response = await system.call('/fn/default/echo/throw');
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ error: 'handler exploded' });
    expect((await bodyOf(system, '/fn/default/echo')).status).toBe(200);
  });

  it('answers 504 past timeoutSec', async () => {
    const started = Date.now();
    const response = await system.call('/fn/default/echo/slow');
    expect(response.status).toBe(504);
    expect(((await response.json()) as { error: string }).error).toMatch(/timed out after 1s/);
    // The handler sleeps 15 s: a 504 well before that shows the proxy did not wait for it. The bound
    // is generous on purpose, so that a loaded machine does not fail it.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("answers the proxy's own 504 when the runtime cannot answer at all (a busy loop)", async () => {
    const started = Date.now();
    const response = await system.call('/fn/default/spin');
    const elapsed = Date.now() - started;
    // The proxy's words, not the runtime's ("function timed out after 1s"), which never come here.
    expect({ status: response.status, body: await response.text() }).toEqual({
      status: 504,
      body: JSON.stringify({ error: 'function default/spin timed out after 1s' }),
    });
    // timeoutSec (1 s) plus the proxy's 1 s of grace; well before the handler lets go after 8 s.
    expect(elapsed).toBeGreaterThanOrEqual(1900);
    expect(elapsed).toBeLessThan(6000);
  });

  it('strips hop-by-hop headers in both directions', async () => {
    // node:http sends the Connection header as given (undici's client rewrites it).
    const text = await new Promise<string>((resolve, reject) => {
      const outgoing = httpRequest(`${system.url}/fn/default/echo/headers`, {
        headers: {
          connection: 'keep-alive, x-hop-secret',
          'x-hop-secret': 'do-not-forward',
          'x-end-to-end': 'forward-me',
          'proxy-authorization': 'Basic abc',
        },
      });
      outgoing.on('response', (incoming) => {
        let data = '';
        incoming.on('data', (chunk: Buffer) => {
          data += chunk.toString();
        });
        incoming.on('end', () => resolve(data));
      });
      outgoing.on('error', reject);
      outgoing.end();
    });
    const body = JSON.parse(text) as { headers: Record<string, string> };
    expect(body.headers['x-end-to-end']).toBe('forward-me');
    expect(body.headers).not.toHaveProperty('x-hop-secret');
    expect(body.headers).not.toHaveProperty('proxy-authorization');
    expect(body.headers['x-forwarded-prefix']).toBe('/fn/default/echo');
    const hop = await system.call('/fn/default/echo/hop');
    expect(hop.headers.get('x-kept')).toBe('yes');
    expect(hop.headers.get('proxy-authenticate')).toBeNull();
  });

  it("passes on the client's address in X-Forwarded-For, and no client can claim another", async () => {
    const response = await system.call('/fn/default/echo/who', {
      headers: { 'x-forwarded-for': '198.51.100.1', 'x-sless-relayed-client-address': '203.0.113.9' },
    });
    const body = (await response.json()) as { headers: Record<string, string> };
    expect(body.headers['x-forwarded-for']).toBe('198.51.100.1, 127.0.0.1');
    expect(body.headers).not.toHaveProperty('x-sless-relayed-client-address');
  });

  it('restarts a crashed process with backoff and serves again', async () => {
    const crashed = await system.call('/fn/default/echo/crash');
    expect([200, 502]).toContain(crashed.status);
    await crashed.text();
    const status = await eventually(
      async () => {
        const current = await system.functionStatus('echo');
        return (current?.restarts ?? 0) >= 1 ? current : undefined;
      },
      10_000,
      'restart in status',
    );
    expect(status.lastError).toMatch(/^process exited \(code 7\)/);
    expect(system.platform.restartCount('default', 'echo')).toBeGreaterThanOrEqual(1);
    await eventually(
      async () => (await bodyOf(system, '/fn/default/echo')).status === 200,
      10_000,
      'serving again',
    );
  });

  it('rolls out a new revision under load without failing a request', async () => {
    const agent = new Agent({ connections: 16 });
    const seen = new Set<string>();
    const failures: string[] = [];
    let total = 0;
    let running = true;
    const worker = async () => {
      while (running) {
        try {
          const response = await request(`${system.url}/fn/default/echo`, { dispatcher: agent });
          const text = await response.body.text();
          total++;
          if (response.statusCode !== 200) failures.push(`${response.statusCode} ${text}`);
          else seen.add((JSON.parse(text) as { version: string }).version);
        } catch (error) {
          failures.push(String(error));
        }
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    await new Promise((r) => setTimeout(r, 200));
    await repo.commit({
      'echo/function.yaml': functionManifest('echo', { timeoutSec: 1, env: { VERSION: 'v2' } }),
    });
    await eventually(async () => seen.has('v2'), 20_000, 'v2 served');
    await new Promise((r) => setTimeout(r, 300));
    running = false;
    await Promise.all(workers);
    await agent.close();
    expect(failures).toEqual([]);
    expect(seen).toEqual(new Set(['v1', 'v2']));
    expect(total).toBeGreaterThan(50);
  });
});
