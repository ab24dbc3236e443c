/**
 * The change feed and the dashboard's files on the real local system with no auth: the event
 * stream starts with `hello`, carries each write of the namespace as GET would answer it and
 * nothing of another namespace, ends when sless stops; `/ui/` answers with its security headers
 * and sits behind the same loopback guards as `/v1`.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { git, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { SseReader } from '../helpers/sse.js';

let system: TestSystem;
let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
const readers: SseReader[] = [];

beforeAll(async () => {
  const root = await tempDir('events-root');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  gitServer = await startGitHttpServer(root);
  system = await startTestSystem({ url: `${gitServer.url}/fns.git` });
});

afterAll(async () => {
  for (const reader of readers) reader.close();
  await system?.close();
  await gitServer?.close();
});

async function open(ns: string): Promise<SseReader> {
  const reader = await SseReader.open(`${system.url}/v1/namespaces/${ns}/events`);
  readers.push(reader);
  return reader;
}

const suspendedSource = (name: string) => ({
  name,
  spec: { url: `${gitServer.url}/fns.git`, suspend: true },
});

function post(path: string, body: unknown): Promise<Response> {
  return system.call(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

function raw(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, unknown> }> {
  const url = new URL(system.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, headers, setHost: !('host' in headers) },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('GET /v1/namespaces/{ns}/events', () => {
  test('hello first, then each write of the namespace as GET answers it, and nothing of another', async () => {
    expect((await post('/v1/namespaces/other/ensure', {})).status).toBe(201);
    const reader = await open('default');
    expect(reader.status).toBe(200);
    expect(reader.contentType).toBe('text/event-stream; charset=utf-8');
    await reader.next('hello', (e) => e.event === 'hello');
    expect(reader.events[0]).toEqual({ event: 'hello', data: { namespace: 'default' } });

    expect((await post('/v1/namespaces/other/sources', suspendedSource('elsewhere'))).status).toBe(201);
    expect((await post('/v1/namespaces/default/sources', suspendedSource('watched'))).status).toBe(201);
    const added = await reader.next('watched added', (e) => (e.data as { name?: string }).name === 'watched');
    expect(added.event).toBe('change');
    expect(added.data).toMatchObject({ type: 'ADDED', kind: 'GitSource', name: 'watched' });
    // Its status (written by the controller as it sees the suspended source) comes as MODIFIED.
    const modified = await reader.next(
      'watched status',
      (e) =>
        (e.data as { type?: string; name?: string }).type === 'MODIFIED' &&
        (e.data as { name?: string }).name === 'watched',
    );
    const got = await (await system.call('/v1/namespaces/default/sources/watched')).json();
    await reader.next(
      'the object GET answers',
      (e) => JSON.stringify((e.data as { object?: unknown }).object) === JSON.stringify(got),
      reader.events.indexOf(modified),
    );
    expect(reader.events.some((e) => JSON.stringify(e.data).includes('elsewhere'))).toBe(false);
  });

  test('a deletion is an event too; an unknown namespace is a 404, not a stream', async () => {
    const reader = await open('default');
    await reader.next('hello', (e) => e.event === 'hello');
    expect((await system.call('/v1/namespaces/default/sources/watched', { method: 'DELETE' })).status).toBe(
      204,
    );
    const deleted = await reader.next('deleted', (e) => (e.data as { type?: string }).type === 'DELETED');
    expect(deleted.data).toMatchObject({ kind: 'GitSource', name: 'watched' });
    const unknown = await system.call('/v1/namespaces/nowhere/events');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'namespace nowhere not found' });
  });

  test('GET /v1/whoami names the caller and, for an admin, every namespace holding objects', async () => {
    const me = await (await system.call('/v1/whoami')).json();
    expect(me).toEqual({
      subject: 'local',
      namespace: 'default',
      admin: true,
      namespaces: ['default', 'other'],
      platform: 'local',
    });
  });
});

describe('/ui/ in no-auth loopback mode', () => {
  test('the page and its script come with a strict content security policy', async () => {
    const page = await system.call('/ui/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain('<script type="module" src="main.js"></script>');
    const script = await system.call('/ui/main.js');
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  });

  test.each([
    ['/ui/..%2Fpackage.json'],
    ['/ui/%2E%2E%2Fapi%2Fapp.js'],
    ['/ui/index.html.map'],
    ['/ui/.tsbuildinfo'],
  ])('%s is a 404: only the dashboard’s own file names are served', async (path) => {
    expect((await system.call(path)).status).toBe(404);
  });

  test.each([
    [{ host: 'attacker.example' }, 'Host header'],
    [{ 'sec-fetch-site': 'cross-site' }, 'cross-site'],
    [{ origin: 'https://attacker.example' }, 'cross-origin'],
  ])('%o is refused on /ui/ as on /v1', async (headers, why) => {
    for (const path of ['/ui/', '/ui/main.js', '/v1/namespaces/default/events']) {
      const answer = await raw(path, headers);
      expect(answer.status, `${path} ${why}`).toBe(403);
    }
  });

  test('a typed-in visit (Sec-Fetch-Site: none) and the page’s own requests are answered', async () => {
    expect((await raw('/ui/', { 'sec-fetch-site': 'none' })).status).toBe(200);
    expect((await raw('/v1/whoami', { 'sec-fetch-site': 'same-origin' })).status).toBe(200);
  });
});

describe('stopping sless', () => {
  test('ends an open event stream instead of waiting for its reader', async () => {
    const reader = await open('default');
    await reader.next('hello', (e) => e.event === 'hello');
    await system.close();
    await reader.ended;
    expect(reader.failure).toBeUndefined();
    expect(reader.events.map((e) => e.event)).toEqual(['hello']);
  });
});
