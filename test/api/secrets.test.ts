/**
 * The secrets API with JWT auth on, as tenants use it: a tenant writes, lists and deletes secrets
 * in its own namespace only; answers hold keys and a hash, never values; bad bodies are 400s naming
 * the field; and sless's own log lines, at trace level, never hold a value.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createJwtAuthenticator } from '../../src/api/auth/jwt.js';
import { createLogger } from '../../src/main.js';
import { LocalSecretStore } from '../../src/secrets/local-store.js';
import { type Harness, startHarness } from './harness.js';

// `sless-` + the first 16 hex digits of sha256(sub), written out (see auth.test.ts).
const ALICE = 'sless-2bd806c97f0e00af';
const BOB = 'sless-81b637d8fcd2c6da';
const VALUE = `sk_live_api_${Math.random().toString(36).slice(2)}${Date.now()}`;

let key: Awaited<ReturnType<typeof generateKeyPair>>;
let jwks: Server;
let h: Harness;
let base: string;
let state: string;
const logLines: string[] = [];

const tokenFor = (sub: string) =>
  new SignJWT({ sub })
    .setProtectedHeader({ alg: 'RS256', kid: 'k' })
    .setIssuer('https://issuer.test')
    .setAudience('sless-api')
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key.privateKey);

const call = async (path: string, token: string, init: RequestInit = {}) => {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${token}`);
  const response = await fetch(`${base}${path}`, { ...init, headers });
  return { status: response.status, text: await response.text() };
};
const put = (ns: string, name: string, token: string, body: unknown) =>
  call(`/v1/namespaces/${ns}/secrets/${name}`, token, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  key = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(key.publicKey)), kid: 'k', alg: 'RS256', use: 'sig' };
  jwks = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  state = await mkdtemp(join(tmpdir(), 'sless-api-secrets-'));
  h = await startHarness({
    authenticator: createJwtAuthenticator({
      key: { kind: 'jwks', url: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json` },
      issuer: 'https://issuer.test',
      audience: 'sless-api',
      algorithms: ['RS256'],
      clockToleranceSec: 5,
      adminClaim: 'sless_admin',
    }),
    logger: createLogger(
      { logLevel: 'trace', prettyLogs: false },
      new Writable({
        write(chunk, _enc, done) {
          logLines.push(String(chunk));
          done();
        },
      }),
    ),
    secretStore: new LocalSecretStore({ stateDir: state, logger: pino({ level: 'silent' }) }).open(),
  });
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => jwks?.close(resolve));
  await rm(state, { recursive: true, force: true });
});

describe('the secrets API', () => {
  test('a tenant writes, lists and deletes secrets in its own namespace; answers hold no value', async () => {
    const alice = await tokenFor('alice');
    expect((await call(`/v1/namespaces/${ALICE}/ensure`, alice, { method: 'POST' })).status).toBe(201);
    const created = await put(ALICE, 'payments', alice, { stringData: { stripe: VALUE } });
    expect(created.status).toBe(201);
    expect(JSON.parse(created.text)).toMatchObject({ name: 'payments', keys: ['stripe'] });
    const replaced = await put(ALICE, 'payments', alice, {
      data: { stripe: Buffer.from(VALUE).toString('base64'), extra: 'eA==' },
    });
    expect(replaced.status).toBe(200);
    const listed = await call(`/v1/namespaces/${ALICE}/secrets`, alice);
    expect(JSON.parse(listed.text)).toMatchObject({
      items: [{ name: 'payments', keys: ['extra', 'stripe'] }],
    });
    const one = await call(`/v1/namespaces/${ALICE}/secrets/payments`, alice);
    for (const text of [created.text, replaced.text, listed.text, one.text]) {
      expect(text).not.toContain(VALUE);
      expect(text).not.toContain(Buffer.from(VALUE).toString('base64'));
    }
    expect((await call(`/v1/namespaces/${ALICE}/secrets/payments`, alice, { method: 'DELETE' })).status).toBe(
      200,
    );
    expect((await call(`/v1/namespaces/${ALICE}/secrets/payments`, alice)).status).toBe(404);
  });

  test("a tenant cannot write, read, list or delete another tenant's secrets", async () => {
    const bob = await tokenFor('bob');
    const alice = await tokenFor('alice');
    expect((await call(`/v1/namespaces/${BOB}/ensure`, bob, { method: 'POST' })).status).toBe(201);
    expect((await put(BOB, 'db', bob, { stringData: { password: VALUE } })).status).toBe(201);
    expect((await put(BOB, 'db', alice, { stringData: { password: 'mine now' } })).status).toBe(403);
    expect((await call(`/v1/namespaces/${BOB}/secrets`, alice)).status).toBe(403);
    expect((await call(`/v1/namespaces/${BOB}/secrets/db`, alice)).status).toBe(403);
    expect((await call(`/v1/namespaces/${BOB}/secrets/db`, alice, { method: 'DELETE' })).status).toBe(403);
    expect(JSON.parse((await call(`/v1/namespaces/${BOB}/secrets`, bob)).text).items).toHaveLength(1);
  });

  test('bad bodies are 400s naming the field, never echoing a value', async () => {
    const alice = await tokenFor('alice');
    const cases: [unknown, RegExp][] = [
      [{ stringData: { 'bad key': VALUE } }, /stringData/],
      [{ data: { k: `${VALUE}!` } }, /body\.data\.k/],
      [{ stringData: {} }, /at least one key/],
      // fastify drops unknown fields, so this is an empty secret.
      [{ other: VALUE }, /at least one key/],
      [{ data: { k: 'eA==' }, stringData: { k: VALUE } }, /both data and stringData/],
    ];
    for (const [body, expected] of cases) {
      const answer = await put(ALICE, 'x', alice, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.text).toMatch(expected);
      expect(answer.text).not.toContain(VALUE);
    }
  });

  test("sless's log lines never hold a value", () => {
    expect(logLines.length).toBeGreaterThan(0);
    const logged = logLines.join('');
    expect(logged).not.toContain(VALUE);
    expect(logged).not.toContain(Buffer.from(VALUE).toString('base64'));
  });
});
