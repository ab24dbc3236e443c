/**
 * Row 4: no-auth loopback mode against a web page. DNS rebinding brings the attacker's Host header
 * to 127.0.0.1; a cross-site form or fetch brings an Origin (and Sec-Fetch-Site). Real sockets, real
 * server: `fetch` cannot set Host, so requests go through node:http.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { git, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { startTestSystem, type TestSystem } from '../helpers/local-system.js';

let system: TestSystem;
let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
let work: TestRepo;

beforeAll(async () => {
  const root = await tempDir('sec-lb-root');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  gitServer = await startGitHttpServer(root);
  work = await TestRepo.create({ 'README.md': 'nothing\n' });
  system = await startTestSystem({ url: `${gitServer.url}/fns.git` });
});

afterAll(async () => {
  await system?.close();
  await gitServer?.close();
  await work?.remove();
});

function send(
  path: string,
  headers: Record<string, string>,
  body?: string,
  method = 'POST',
): Promise<{ status: number; body: string }> {
  const url = new URL(system.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, method, headers, setHost: !('host' in headers) },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const SOURCE = JSON.stringify({
  name: 'evil',
  spec: { url: 'https://attacker.example/x.git', suspend: true },
});

describe('row 4: no-auth loopback mode refuses what a browser page can send', () => {
  test('DNS rebinding: a Host other than loopback is refused, on /v1 and /metrics', async () => {
    const rebound = await send(
      '/v1/namespaces/default/sources',
      {
        host: 'attacker.example',
        origin: 'http://attacker.example',
        'content-type': 'application/json',
      },
      SOURCE,
    );
    expect(rebound.status).toBe(403);
    expect(rebound.body).toContain('Host header');
    expect(
      (await send('/metrics', { host: `attacker.example:${new URL(system.url).port}` }, undefined, 'GET'))
        .status,
    ).toBe(403);
    expect(await system.store.get('GitSource', 'default', 'evil')).toBeUndefined();
  });

  test('a cross-site text/plain POST (no CORS preflight) is refused', async () => {
    const port = new URL(system.url).port;
    const crossSite = await send(
      '/v1/namespaces/default/sources/test/sync',
      {
        host: `localhost:${port}`,
        origin: 'https://attacker.example',
        'sec-fetch-site': 'cross-site',
        'content-type': 'text/plain',
      },
      SOURCE,
    );
    expect(crossSite.status).toBe(403);
    // Without Origin (an older browser), text/plain still never parses as a resource.
    const plain = await send(
      '/v1/namespaces/default/sources',
      {
        host: `localhost:${port}`,
        'content-type': 'text/plain',
      },
      SOURCE,
    );
    expect(plain.status).toBe(415);
    const fetchMetadataOnly = await send(
      '/v1/namespaces/default/sources',
      {
        host: `127.0.0.1:${port}`,
        'sec-fetch-site': 'same-site',
        'content-type': 'application/json',
      },
      SOURCE,
    );
    expect(fetchMetadataOnly.status).toBe(403);
    expect(await system.store.get('GitSource', 'default', 'evil')).toBeUndefined();
  });

  test('the developer’s own curl, and a page on localhost itself, still work', async () => {
    const port = new URL(system.url).port;
    const ok = await send(
      '/v1/namespaces/default/sources',
      {
        host: `localhost:${port}`,
        'content-type': 'application/json',
      },
      SOURCE,
    );
    expect(ok.status).toBe(201);
    const sameOrigin = await send(
      '/v1/namespaces/default/sources',
      {
        host: `[::1]:${port}`,
        origin: `http://localhost:${port}`,
        'sec-fetch-site': 'same-origin',
        'content-type': 'application/json',
      },
      SOURCE,
    );
    expect(sameOrigin.status).toBe(200);
  });
});
