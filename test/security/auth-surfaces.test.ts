/**
 * Row 8 and the hanging JWKS, against the real composition root with auth on: /metrics names every
 * tenant, so only an admin (or the scrape token) reads it; a JWKS endpoint that never answers costs
 * one bounded wait, then requests fail fast for the cool-down instead of each waiting again.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, describe, expect, test } from 'vitest';
import { loadLocalConfig } from '../../src/config/config.js';
import { tenantNamespace } from '../../src/core/naming.js';
import { type LocalSystem, startLocalSystem } from '../../src/main.js';
import { tempDir } from '../helpers/git.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'sless';
const SCRAPE_TOKEN = 'scrape-token-for-prometheus';
const logger = pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' });

const systems: LocalSystem[] = [];
afterAll(async () => {
  for (const system of systems) await system.stop();
});

async function start(env: NodeJS.ProcessEnv): Promise<LocalSystem> {
  const config = loadLocalConfig(
    { port: '0', 'state-dir': await tempDir('sec-auth'), interval: '1h' },
    { SLESS_AUTH_ISSUER: ISSUER, SLESS_AUTH_AUDIENCE: AUDIENCE, ...env },
  );
  const system = await startLocalSystem(config, { logger });
  systems.push(system);
  return system;
}

describe('row 8: /metrics with auth on', () => {
  test('the public and tenants learn no tenant names; an admin and the scrape token do', async () => {
    const keys = await generateKeyPair('ES256');
    const system = await start({
      SLESS_AUTH_PUBLIC_KEY: await exportSPKI(keys.publicKey),
      SLESS_METRICS_TOKEN: SCRAPE_TOKEN,
    });
    const token = (sub: string, claims: Record<string, unknown> = {}) =>
      new SignJWT({ sub, ...claims })
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(keys.privateKey);
    const alice = tenantNamespace('alice');
    const bearer = async (value: string) => ({ authorization: `Bearer ${value}` });
    const call = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
      fetch(`${system.url}${path}`, { method, headers });
    expect(
      (await call(`/v1/namespaces/${alice}/ensure`, await bearer(await token('alice')), 'POST')).status,
    ).toBe(201);
    // Something per tenant in the registry: a proxied request to one of alice's (unknown) functions.
    await call(`/fn/${alice}/shop`);

    const anonymous = await call('/metrics');
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).not.toContain('sless-');
    expect((await call('/metrics', await bearer(await token('alice')))).status).toBe(403);
    const admin = await call('/metrics', await bearer(await token('root', { sless_admin: true })));
    expect(admin.status).toBe(200);
    expect(await admin.text()).toContain('sless_proxy_requests_total');
    expect((await call('/metrics', await bearer(SCRAPE_TOKEN))).status).toBe(200);
    expect((await call('/metrics', await bearer(`${SCRAPE_TOKEN}x`))).status).toBe(401);
  });
});

describe('a JWKS endpoint that hangs', () => {
  let hanging: Server;
  const held: ServerResponse[] = [];
  afterAll(async () => {
    for (const response of held) response.destroy();
    await new Promise((resolve) => hanging?.close(resolve));
  });

  test('one bounded wait (503), then fail-fast 503s during the cool-down: no second fetch', async () => {
    let fetches = 0;
    hanging = createServer((_request, response) => {
      fetches++;
      held.push(response); // never answered
    });
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const system = await start({
      SLESS_AUTH_JWKS_URL: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/jwks`,
    });
    const keys = await generateKeyPair('ES256');
    const jwt = await new SignJWT({ sub: 'alice' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(keys.privateKey);
    const call = () =>
      fetch(`${system.url}/v1/namespaces/${tenantNamespace('alice')}/sources`, {
        headers: { authorization: `Bearer ${jwt}` },
      });
    const first = await call();
    expect(first.status).toBe(503);
    expect(fetches).toBe(1);
    for (let i = 0; i < 5; i++) {
      const again = await call();
      expect(again.status).toBe(503);
      expect(((await again.json()) as { error: string }).error).toBe('signing keys are unreachable');
    }
    // Five more requests, answered, and the endpoint was not asked again.
    expect(fetches).toBe(1);
  });
});
