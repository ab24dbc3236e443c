/**
 * The real composition root (startLocalSystem: controller, store, platform) with auth ON through the
 * environment, as `sless dev` would run it: a tenant registers a GitSource over HTTP, the controller
 * picks it up by itself, a signed webhook makes it sync a new commit at once (the poll interval is an
 * hour), and /metrics counts those syncs. The repository holds no functions, so nothing is built.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadLocalConfig } from '../../src/config/config.js';
import type { GitSourceStatus } from '../../src/core/resources.js';
import { type LocalSystem, startLocalSystem } from '../../src/main.js';
import { git, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { eventually } from '../helpers/local-system.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'sless';
const WEBHOOK_SECRET = 'system-test-secret';
const SCRAPE_TOKEN = 'system-test-scrape-token';

describe('startLocalSystem with auth on', () => {
  let jwks: Server;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let work: TestRepo;
  let system: LocalSystem;
  let token: string;
  // Golden: the namespace the subject `alice` owns (sless- + sha256('alice')[0:16]).
  const ns = 'sless-2bd806c97f0e00af';

  const api = (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(`${system.url}${path}`, { ...init, headers });
  };
  const lastSynced = async () => {
    const response = await api(`/v1/namespaces/${ns}/sources/repo`);
    return ((await response.json()) as { status?: GitSourceStatus }).status?.lastSyncedCommit;
  };

  beforeAll(async () => {
    const key = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(key.publicKey)), kid: 'k1', alg: 'ES256' };
    jwks = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    token = await new SignJWT({ sub: 'alice' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('10m')
      .sign(key.privateKey);

    const root = await tempDir('api-git-root');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'repo.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({ 'README.md': 'no functions here\n' });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'repo.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');

    const config = loadLocalConfig(
      { port: '0', 'state-dir': await tempDir('api-state'), interval: '1h' },
      {
        SLESS_AUTH_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
        SLESS_AUTH_ISSUER: ISSUER,
        SLESS_AUTH_AUDIENCE: AUDIENCE,
        // The secret signs for this tenant's `repo` only: the namespace is part of the name.
        [`SLESS_WEBHOOK_SECRET_${ns.toUpperCase().replace(/-/g, '_')}__REPO`]: WEBHOOK_SECRET,
        SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
        SLESS_METRICS_TOKEN: SCRAPE_TOKEN,
      },
    );
    expect(config.authDisabled).toBe(false);
    system = await startLocalSystem(config, {
      logger: pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' }),
    });
  });

  afterAll(async () => {
    await system?.stop();
    await gitServer?.close();
    await new Promise((resolve) => jwks?.close(resolve));
    await work?.remove();
  });

  test('register over the API → controller syncs; signed webhook → immediate sync; metrics count it', async () => {
    expect((await fetch(`${system.url}/v1/namespaces/${ns}/sources`)).status).toBe(401);
    expect((await api(`/v1/namespaces/${ns}/sources`)).status).toBe(404);
    expect((await api(`/v1/namespaces/${ns}/ensure`, { method: 'POST' })).status).toBe(201);

    const registered = await api(`/v1/namespaces/${ns}/sources`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'repo', spec: { url: `${gitServer.url}/repo.git`, interval: '1h' } }),
    });
    expect(registered.status).toBe(201);
    const first = await git(work.dir, 'rev-parse', 'HEAD');
    await eventually(async () => (await lastSynced()) === first, 30_000, 'first sync');

    const second = await work.commit({ 'README.md': 'still none\n' });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const body = JSON.stringify({ ref: 'refs/heads/main', after: second });
    const hook = await fetch(`${system.url}/v1/webhooks/${ns}/repo`, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`,
      },
    });
    expect(hook.status).toBe(202);
    await eventually(async () => (await lastSynced()) === second, 30_000, 'webhook sync');

    // Metrics name every tenant: the public gets 401, a tenant 403, the operator's scraper the text.
    expect((await fetch(`${system.url}/metrics`)).status).toBe(401);
    expect((await api('/metrics')).status).toBe(403);
    const metrics = await (
      await fetch(`${system.url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } })
    ).text();
    const synced = new RegExp(
      `sless_source_syncs_total\\{namespace="${ns}",source="repo",result="synced"\\} (\\d+)`,
    );
    expect(Number(synced.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
  });
});
