/**
 * JWT auth over the real API app on a real port, with keys served by a local JWKS server: tenants act
 * only in their own namespace, admins everywhere, the clock tolerance, RS256/ES256/EdDSA tokens, bad or
 * HS256 tokens refused with a bearer challenge, /metrics for admins only, tokens censored by the real
 * logger, PEM and JWK keys, and an unreachable JWKS as a 503.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createJwtAuthenticator } from '../../src/api/auth/jwt.js';
import type { AuthSettings } from '../../src/config/auth.js';
import { createLogger } from '../../src/main.js';
import { type Harness, startHarness } from './harness.js';

/**
 * The namespaces these subjects own, written out rather than computed with the function under test:
 * `sless-` + the first 16 hex digits of sha256(sub), from `printf '%s' SUB | sha256sum`.
 */
const NS = {
  alice: 'sless-2bd806c97f0e00af',
  bob: 'sless-81b637d8fcd2c6da',
  carol: 'sless-4c26d9074c27d89e',
  dave: 'sless-61ea0803f8853523',
} as const;

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'sless-api';

type Key = Awaited<ReturnType<typeof generateKeyPair>>;

let rsa: Key;
let ec: Key;
let ed: Key;
let stranger: Key;
let jwks: Server;
let jwksUrl: string;
let h: Harness;
let base: string;
const logLines: string[] = [];

async function sign(
  key: Key,
  alg: string,
  kid: string,
  claims: Record<string, unknown>,
  options: { exp?: string | number; aud?: string; iss?: string } = {},
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg, kid })
    .setIssuer(options.iss ?? ISSUER)
    .setAudience(options.aud ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(options.exp ?? '5m')
    .sign(key.privateKey);
}

const tokenFor = (sub: string, extra: Record<string, unknown> = {}) =>
  sign(rsa, 'RS256', 'rsa-1', { sub, ...extra });

async function call(path: string, token: string | undefined, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token !== undefined) headers.set('authorization', `Bearer ${token}`);
  return fetch(`${base}${path}`, { ...init, headers });
}

function settings(key: AuthSettings['key']): AuthSettings {
  return {
    key,
    issuer: ISSUER,
    audience: AUDIENCE,
    algorithms: ['RS256', 'ES256', 'EdDSA'],
    clockToleranceSec: 5,
    adminClaim: 'sless_admin',
  };
}

function sinkFor(lines: string[]): Writable {
  return new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
}

beforeAll(async () => {
  [rsa, ec, ed, stranger] = await Promise.all([
    generateKeyPair('RS256'),
    generateKeyPair('ES256'),
    generateKeyPair('EdDSA'),
    generateKeyPair('RS256'),
  ]);
  const keys: JWK[] = [
    { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    { ...(await exportJWK(ed.publicKey)), kid: 'ed-1', alg: 'EdDSA', use: 'sig' },
  ];
  jwks = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;

  const sink = sinkFor(logLines);
  h = await startHarness({
    authenticator: createJwtAuthenticator(settings({ kind: 'jwks', url: jwksUrl })),
    // The logger sless really runs with (redaction included), at its most talkative level.
    logger: createLogger({ logLevel: 'trace', prettyLogs: false }, sink),
  });
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => jwks?.close(resolve));
});

describe('JWT on /v1 (JWKS)', () => {
  test('a tenant acts in its own namespace: ensure, register, list', async () => {
    const token = await tokenFor('alice');
    const ns = NS.alice;
    expect(ns).toMatch(/^sless-[0-9a-f]{16}$/);
    expect((await call(`/v1/namespaces/${ns}/ensure`, token, { method: 'POST' })).status).toBe(201);
    const created = await call(`/v1/namespaces/${ns}/sources`, token, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'repo', spec: { url: 'https://git.example.com/a.git' } }),
    });
    expect(created.status).toBe(201);
    const list = await call(`/v1/namespaces/${ns}/sources`, token);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { items: unknown[] }).items).toHaveLength(1);
  });

  test("tenant A cannot list, read, sync, delete or write anything of tenant B's", async () => {
    const bob = await tokenFor('bob');
    const bobNs = NS.bob;
    expect((await call(`/v1/namespaces/${bobNs}/ensure`, bob, { method: 'POST' })).status).toBe(201);
    const registered = await call(`/v1/namespaces/${bobNs}/sources`, bob, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'secret-repo', spec: { url: 'https://git.example.com/b.git' } }),
    });
    expect(registered.status).toBe(201);

    const alice = await tokenFor('alice');
    const attempts: Array<[string, string]> = [
      ['GET', `/v1/namespaces/${bobNs}/sources`],
      ['GET', `/v1/namespaces/${bobNs}/sources/secret-repo`],
      ['GET', `/v1/namespaces/${bobNs}/functions`],
      ['GET', `/v1/namespaces/${bobNs}/triggers`],
      ['GET', `/v1/namespaces/${bobNs}/jobs`],
      ['POST', `/v1/namespaces/${bobNs}/sources/secret-repo/sync`],
      ['GET', `/v1/namespaces/${bobNs}/functions/f/logs`],
      ['GET', `/v1/namespaces/${bobNs}/functions/f/logs?follow=true`],
      ['GET', `/v1/namespaces/${bobNs}/invocations`],
      ['GET', `/v1/namespaces/${bobNs}/invocations/5f0c6c5e-0000-4000-8000-000000000001`],
      ['GET', `/v1/namespaces/${bobNs}/dead-letters`],
      ['POST', `/v1/namespaces/${bobNs}/invocations/5f0c6c5e-0000-4000-8000-000000000001/replay`],
      ['DELETE', `/v1/namespaces/${bobNs}/sources/secret-repo`],
      ['POST', `/v1/namespaces/${bobNs}/ensure`],
      ['POST', `/v1/namespaces/default/ensure`],
      ['GET', `/v1/namespaces/default/sources`],
    ];
    for (const [method, path] of attempts) {
      const response = await call(path, alice, { method });
      expect(response.status, `${method} ${path}`).toBe(403);
      expect(await response.json()).toEqual({ error: expect.stringContaining('is not yours') });
    }
    const writes = await call(`/v1/namespaces/${bobNs}/sources`, alice, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'hijack', spec: { url: 'https://evil.example.com/x.git' } }),
    });
    expect(writes.status).toBe(403);
    // Nothing of Bob's moved, and no sync ran on Alice's behalf.
    expect(await h.store.get('GitSource', bobNs, 'secret-repo')).toBeDefined();
    expect(await h.store.get('GitSource', bobNs, 'hijack')).toBeUndefined();
    expect(h.syncCalls.filter((c) => c.namespace === bobNs)).toEqual([]);
  });

  test('only an admin may register a repository path on the server itself', async () => {
    const body = (url: string) => ({
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'local', spec: { url } }),
    });
    const carol = await tokenFor('carol');
    const ns = NS.carol;
    expect((await call(`/v1/namespaces/${ns}/ensure`, carol, { method: 'POST' })).status).toBe(201);
    for (const url of ['/etc', 'file:///srv/other-tenant/repo']) {
      const refused = await call(`/v1/namespaces/${ns}/sources`, carol, body(url));
      expect(refused.status, url).toBe(403);
      expect(await refused.json()).toEqual({
        error: 'spec.url: a local repository path can only be registered by an admin',
      });
    }
    const admin = await tokenFor('root', { sless_admin: true });
    expect((await call(`/v1/namespaces/${ns}/sources`, admin, body('/srv/repo'))).status).toBe(201);
  });

  test('an admin claim opens every namespace; a non-true claim does not', async () => {
    const admin = await tokenFor('root', { sless_admin: true });
    expect((await call('/v1/namespaces/default/sources', admin)).status).toBe(200);
    expect((await call(`/v1/namespaces/${NS.bob}/sources`, admin)).status).toBe(200);
    const pretender = await tokenFor('mallory', { sless_admin: 'true' });
    expect((await call('/v1/namespaces/default/sources', pretender)).status).toBe(403);
  });

  test('the clock tolerance (5 s here) admits a token expired 2 s ago, and no older one', async () => {
    const now = Math.floor(Date.now() / 1000);
    const late = await sign(rsa, 'RS256', 'rsa-1', { sub: 'alice' }, { exp: now - 2 });
    expect((await call(`/v1/namespaces/${NS.alice}/functions`, late)).status).toBe(200);
    const tooLate = await sign(rsa, 'RS256', 'rsa-1', { sub: 'alice' }, { exp: now - 30 });
    const refused = await call(`/v1/namespaces/${NS.alice}/functions`, tooLate);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: 'token expired' });
  });

  test('ES256 and EdDSA tokens from the JWKS verify', async () => {
    const es = await sign(ec, 'ES256', 'ec-1', { sub: 'alice' });
    const eddsa = await sign(ed, 'EdDSA', 'ed-1', { sub: 'alice' });
    for (const token of [es, eddsa])
      expect((await call(`/v1/namespaces/${NS.alice}/functions`, token)).status).toBe(200);
  });

  test('bad tokens are 401 with a Bearer challenge and an {error}', async () => {
    const now = Math.floor(Date.now() / 1000);
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, exp: now + 300 })}.`;
    const valid = await tokenFor('alice');
    const [header, payload] = valid.split('.') as [string, string];
    const cases: Array<[string, string | undefined, string]> = [
      ['missing', undefined, 'missing bearer token'],
      ['expired', await sign(rsa, 'RS256', 'rsa-1', { sub: 'alice' }, { exp: now - 60 }), 'token expired'],
      ['alg none', unsigned, 'token algorithm not allowed'],
      ['signed by another key', await sign(stranger, 'RS256', 'rsa-1', { sub: 'alice' }), 'signature'],
      ['unknown kid', await sign(stranger, 'RS256', 'nope', { sub: 'alice' }), 'no key matches'],
      ['wrong audience', await sign(rsa, 'RS256', 'rsa-1', { sub: 'alice' }, { aud: 'other' }), '"aud"'],
      ['wrong issuer', await sign(rsa, 'RS256', 'rsa-1', { sub: 'alice' }, { iss: 'https://evil' }), '"iss"'],
      ['no subject', await sign(rsa, 'RS256', 'rsa-1', {}), '"sub"'],
      [
        'tampered payload',
        `${header}.${Buffer.from('{"sub":"bob"}').toString('base64url')}.${valid.split('.')[2]}`,
        'signature',
      ],
      ['garbage', 'not.a.jwt', 'malformed token'],
      ['header only', header, 'token'],
      ['payload swapped in', `${header}.${payload}`, 'token'],
    ];
    for (const [what, token, message] of cases) {
      const response = await call(`/v1/namespaces/${NS.alice}/sources`, token);
      expect(response.status, what).toBe(401);
      expect(response.headers.get('www-authenticate'), what).toMatch(/^Bearer realm="sless"/);
      const body = (await response.json()) as { error: string };
      expect(body.error, what).toContain(message);
    }
    const basic = await fetch(`${base}/v1/namespaces/default/sources`, {
      headers: { authorization: 'Basic YTpi' },
    });
    expect(basic.status).toBe(401);
  });

  test('an HS256 token (alg confusion with the public key) is refused', async () => {
    const secret = new TextEncoder().encode('x'.repeat(32));
    const hs = await new SignJWT({ sub: 'alice' })
      .setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(secret);
    const response = await call(`/v1/namespaces/${NS.alice}/sources`, hs);
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: string }).error).toContain('algorithm not allowed');
  });

  test('public routes need no token; webhooks answer for their signature, not a bearer', async () => {
    for (const path of ['/healthz', '/readyz', '/openapi.json'])
      expect((await fetch(`${base}${path}`)).status, path).toBe(200);
    expect((await fetch(`${base}/fn/default/hello`)).status).toBe(404);
    const hook = await fetch(`${base}/v1/webhooks/default/repo`, { method: 'POST', body: '{}' });
    expect(hook.status).toBe(403);
    expect(hook.headers.get('www-authenticate')).toBeNull();
  });

  test('/metrics names every tenant, so it needs an admin token when auth is on', async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    expect((await call('/metrics', await tokenFor('alice'))).status).toBe(403);
    const admin = await call('/metrics', await tokenFor('root', { sless_admin: true }));
    expect(admin.status).toBe(200);
    expect(await admin.text()).toContain('sless_source_syncs_total');
  });

  test('tokens never reach the log', async () => {
    const token = await tokenFor('alice');
    const before = logLines.length;
    await call('/v1/namespaces/default/sources', token);
    await call('/v1/namespaces/default/sources', `${token}x`);
    await call(`/v1/namespaces/${NS.alice}/sources`, token);
    const signature = token.split('.')[2] as string;
    const written = logLines.slice(before).join('');
    // Request logging is off in the app, so this is often empty; the part below shows the logger
    // would censor a token even if a future log call passed one along.
    expect(written).not.toContain(signature);

    // Whatever shape a log call gives a request or a credential, the real logger censors it.
    const logger = createLogger({ logLevel: 'trace', prettyLogs: false }, sinkFor(logLines));
    const mark = logLines.length;
    logger.info({ req: { headers: { authorization: `Bearer ${token}` } } }, 'request');
    logger.info({ headers: { authorization: `Bearer ${token}` } }, 'headers');
    logger.info({ source: { token, password: 'hunter2' } }, 'credentials');
    logger.info({ git: { authorization: `Basic ${token}` } }, 'basic');
    const censored = logLines.slice(mark).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(censored).toHaveLength(4);
    expect(censored.map((entry) => entry.msg)).toEqual(['request', 'headers', 'credentials', 'basic']);
    expect(logLines.slice(mark).join('')).not.toContain(signature);
    expect(logLines.slice(mark).join('')).not.toContain('hunter2');
    expect(censored[0]).toMatchObject({ req: { headers: { authorization: '[redacted]' } } });
    expect(censored[2]).toMatchObject({ source: { token: '[redacted]', password: '[redacted]' } });
  });
});

describe('JWT with a configured public key, and unreachable keys', () => {
  test('PEM public key: good token 200, other key 401', async () => {
    const pem = await exportSPKI(ec.publicKey);
    const app = await startHarness({
      authenticator: createJwtAuthenticator(settings({ kind: 'publicKey', key: pem })),
    });
    try {
      const ok = await sign(ec, 'ES256', 'any', { sub: 'carol' });
      const good = await app.app.inject({
        url: `/v1/namespaces/${NS.carol}/ensure`,
        method: 'POST',
        headers: { authorization: `Bearer ${ok}` },
      });
      expect(good.statusCode).toBe(201);
      const other = await sign(rsa, 'RS256', 'rsa-1', { sub: 'carol' });
      const bad = await app.app.inject({
        url: `/v1/namespaces/${NS.carol}/ensure`,
        method: 'POST',
        headers: { authorization: `Bearer ${other}` },
      });
      expect(bad.statusCode).toBe(401);
    } finally {
      await app.close();
    }
  });

  test('a JWK public key works as well', async () => {
    const jwk = JSON.stringify(await exportJWK(ed.publicKey));
    const app = await startHarness({
      authenticator: createJwtAuthenticator(settings({ kind: 'publicKey', key: jwk })),
    });
    try {
      const token = await sign(ed, 'EdDSA', 'k', { sub: 'dave' });
      const response = await app.app.inject({
        url: `/v1/namespaces/${NS.dave}/ensure`,
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(response.statusCode).toBe(201);
    } finally {
      await app.close();
    }
  });

  test('JWKS endpoint down → 503 {error}, never a 500', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const app = await startHarness({
      authenticator: createJwtAuthenticator(settings({ kind: 'jwks', url: `http://127.0.0.1:${port}/jwks` })),
    });
    try {
      const token = await tokenFor('alice');
      const response = await app.app.inject({
        url: '/v1/namespaces/default/sources',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(response.statusCode).toBe(503);
      expect(response.json()).toEqual({ error: 'signing keys are unreachable' });
    } finally {
      await app.close();
    }
  });
});
