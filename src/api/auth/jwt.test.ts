/**
 * JwtAuthenticator with real ES256 keys and tokens signed by jose: a token without expiry, malformed
 * headers, the clock tolerance, each verification failure as a 401 that never echoes the token and key
 * trouble as a 503; PEM and JWK key parsing; and a JWKS endpoint on a real local HTTP server, whose
 * failure or slowness starts a cool-down while a token naming an unknown key does not.
 */
import { createPrivateKey } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyRequest } from 'fastify';
import {
  exportJWK,
  exportPKCS8,
  exportSPKI,
  generateKeyPair,
  type JWTVerifyGetKey,
  errors as joseErrors,
  SignJWT,
} from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { UnauthorizedError, UnavailableError } from '../errors.js';
import {
  createJwtAuthenticator,
  JWKS_FAILURE_COOLDOWN_MS,
  JwtAuthenticator,
  type JwtAuthenticatorOptions,
  jwksWithCooldown,
  parsePublicKey,
} from './jwt.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'sless-api';
type Key = Awaited<ReturnType<typeof generateKeyPair>>;
let es: Key;
let other: Key;

beforeAll(async () => {
  [es, other] = await Promise.all([
    generateKeyPair('ES256', { extractable: true }),
    generateKeyPair('ES256'),
  ]);
});

const request = (authorization?: string) =>
  ({ headers: authorization === undefined ? {} : { authorization } }) as unknown as FastifyRequest;

/** jose's CryptoKeys verify as well as the KeyObjects sless parses; the option type names the latter. */
function authenticator(key: Key['publicKey'] | JWTVerifyGetKey, tolerance = 30) {
  return new JwtAuthenticator({
    key: key as JwtAuthenticatorOptions['key'],
    issuer: ISSUER,
    audience: AUDIENCE,
    algorithms: ['ES256'],
    clockToleranceSec: tolerance,
    adminClaim: 'sless_admin',
    description: 'test',
  });
}

async function token(
  claims: Record<string, unknown>,
  options: { exp?: number; iss?: string; aud?: string; key?: Key } = {},
) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer(options.iss ?? ISSUER)
    .setAudience(options.aud ?? AUDIENCE)
    .setExpirationTime(options.exp ?? Math.floor(Date.now() / 1000) + 300)
    .sign((options.key ?? es).privateKey);
}

async function refusal(auth: JwtAuthenticator, header: string | undefined): Promise<Error> {
  const error = await auth.authenticate(request(header)).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  if (!error) throw new Error(`accepted: ${header}`);
  return error;
}

describe('JwtAuthenticator', () => {
  it('refuses a token without an expiry, however well signed: it would be good forever', async () => {
    const auth = authenticator(es.publicKey);
    const forever = await new SignJWT({ sub: 'a' })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .sign(es.privateKey);
    const error = await refusal(auth, `Bearer ${forever}`);
    expect(error).toBeInstanceOf(UnauthorizedError);
    expect(error.message).toBe('token claim "exp" is missing');
    // The control: the same token with an expiry passes.
    expect((await auth.authenticate(request(`Bearer ${await token({ sub: 'a' })}`))).subject).toBe('a');
  });

  it('maps the subject to its golden namespace and honours only a boolean true admin claim', async () => {
    const auth = authenticator(es.publicKey);
    expect(await auth.authenticate(request(`Bearer ${await token({ sub: 'alice' })}`))).toEqual({
      subject: 'alice',
      namespace: 'sless-2bd806c97f0e00af',
      admin: false,
    });
    const admin = await auth.authenticate(
      request(`bearer   ${await token({ sub: 'root', sless_admin: true })}  `),
    );
    expect(admin).toEqual({ subject: 'root', namespace: expect.stringMatching(/^sless-/), admin: true });
    for (const claim of ['true', 1, {}])
      expect(
        (await auth.authenticate(request(`Bearer ${await token({ sub: 'x', sless_admin: claim })}`))).admin,
      ).toBe(false);
  });

  it('refuses malformed Authorization headers with a bearer challenge', async () => {
    const auth = authenticator(es.publicKey);
    const good = await token({ sub: 'alice' });
    const cases: Array<[string | undefined, string]> = [
      [undefined, 'missing bearer token'],
      ['', 'missing bearer token'],
      [`Basic ${good}`, 'authorization header must be "Bearer <token>"'],
      ['Bearer', 'authorization header must be "Bearer <token>"'],
      [`Bearer ${good} extra`, 'authorization header must be "Bearer <token>"'],
      [`XBearer ${good}`, 'authorization header must be "Bearer <token>"'],
      [`Bearer${good}`, 'authorization header must be "Bearer <token>"'],
      [`Bearer ${'a'.repeat(16 * 1024 + 1)}`, 'token too large'],
      [`Bearer ${'a'.repeat(16 * 1024)}`, 'malformed token'],
      ['Bearer not.a.jwt', 'malformed token'],
    ];
    for (const [header, message] of cases) {
      const error = await refusal(auth, header);
      expect(error, String(header).slice(0, 40)).toBeInstanceOf(UnauthorizedError);
      expect(error.message, String(header).slice(0, 40)).toBe(message);
    }
    expect((await refusal(auth, undefined)) as UnauthorizedError).toMatchObject({
      challenge: 'Bearer realm="sless"',
    });
    // A token that was sent but is unusable gets error="invalid_token" (RFC 6750); a missing one does not.
    for (const header of [
      'Bearer not.a.jwt',
      `Bearer ${'a'.repeat(16 * 1024 + 1)}`,
      `Bearer ${await token({ sub: '' })}`,
    ])
      expect(((await refusal(auth, header)) as UnauthorizedError).challenge, header.slice(0, 30)).toMatch(
        /^Bearer realm="sless", error="invalid_token", error_description="/,
      );
  });

  it('allows exactly the configured clock tolerance past expiry, and no more', async () => {
    const now = Math.floor(Date.now() / 1000);
    const auth = authenticator(es.publicKey, 30);
    // Expired 10 s ago, 30 s tolerance: still accepted.
    expect(
      (await auth.authenticate(request(`Bearer ${await token({ sub: 'a' }, { exp: now - 10 })}`))).subject,
    ).toBe('a');
    // Expired 90 s ago: refused.
    expect((await refusal(auth, `Bearer ${await token({ sub: 'a' }, { exp: now - 90 })}`)).message).toBe(
      'token expired',
    );
    // No tolerance: 10 s late is refused.
    expect(
      (
        await refusal(
          authenticator(es.publicKey, 0),
          `Bearer ${await token({ sub: 'a' }, { exp: now - 10 })}`,
        )
      ).message,
    ).toBe('token expired');
  });

  it('translates every verification failure to a token-free 401, and key trouble to 503', async () => {
    const auth = authenticator(es.publicKey);
    const cases: Array<[string, string]> = [
      [await token({ sub: 'a' }, { key: other }), 'token signature is invalid'],
      [await token({ sub: 'a' }, { iss: 'https://evil' }), 'token claim "iss" check failed'],
      [await token({ sub: 'a' }, { aud: 'other' }), 'token claim "aud" check failed'],
      [await token({}), 'token claim "sub" is missing'],
      [await token({ sub: '' }), 'token has no subject'],
      [await token({ sub: 7 }), 'token has no subject'],
    ];
    for (const [jwt, message] of cases) expect((await refusal(auth, `Bearer ${jwt}`)).message).toBe(message);
    const rs = await generateKeyPair('RS256');
    const rsToken = await new SignJWT({ sub: 'a' })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(rs.privateKey);
    expect((await refusal(auth, `Bearer ${rsToken}`)).message).toBe('token algorithm not allowed');

    const throwing =
      (error: Error): JWTVerifyGetKey =>
      () => {
        throw error;
      };
    const jwt = `Bearer ${await token({ sub: 'a' })}`;
    const keyCases: Array<[Error, string, typeof UnauthorizedError | typeof UnavailableError]> = [
      [new joseErrors.JWKSNoMatchingKey(), 'no key matches the token', UnauthorizedError],
      [new joseErrors.JWKSMultipleMatchingKeys(), 'several keys match the token', UnauthorizedError],
      [new joseErrors.JWKSTimeout(), 'signing keys are unreachable', UnavailableError],
      [new joseErrors.JWKSInvalid(), 'signing keys are invalid', UnavailableError],
      [new joseErrors.JOSENotSupported(), 'token algorithm not supported', UnauthorizedError],
      [new joseErrors.JWSInvalid(), 'malformed token', UnauthorizedError],
      [new joseErrors.JWTInvalid(), 'malformed token', UnauthorizedError],
      [new joseErrors.JWKInvalid(), 'invalid token', UnauthorizedError],
      [new joseErrors.JOSEError(), 'signing keys are unreachable', UnavailableError],
      [new TypeError('fetch failed'), 'signing keys are unreachable', UnavailableError],
    ];
    for (const [thrown, message, type] of keyCases) {
      const error = await refusal(authenticator(throwing(thrown)), jwt);
      expect(error.message, thrown.name).toBe(message);
      expect(error, thrown.name).toBeInstanceOf(type);
    }
    // A 401 never echoes the token.
    const bad = await refusal(auth, `Bearer ${cases[0]?.[0]}`);
    expect(JSON.stringify({ m: bad.message, c: (bad as UnauthorizedError).challenge })).not.toContain(
      (cases[0]?.[0] ?? '').split('.')[2],
    );
  });
});

describe('keys and settings', () => {
  it('parses PEM and JWK public keys, and refuses private keys', async () => {
    const pem = await exportSPKI(es.publicKey);
    expect(parsePublicKey(`\n${pem}\n`).asymmetricKeyType).toBe('ec');
    expect(parsePublicKey(JSON.stringify(await exportJWK(es.publicKey))).asymmetricKeyType).toBe('ec');
    expect(parsePublicKey(`\n  ${JSON.stringify(await exportJWK(es.publicKey))}\n`).asymmetricKeyType).toBe(
      'ec',
    );
    const pkcs8 = await exportPKCS8(es.privateKey);
    expect(() => parsePublicKey(pkcs8)).toThrow(
      'SLESS_AUTH_PUBLIC_KEY must be a public key, not a private one',
    );
    const privateJwk = JSON.stringify(createPrivateKey(pkcs8).export({ format: 'jwk' }));
    expect(() => parsePublicKey(privateJwk)).toThrow(
      'SLESS_AUTH_PUBLIC_KEY must be a public key, not a private one',
    );
  });

  it('builds an authenticator from settings that verifies real tokens, and describes itself', async () => {
    const settings = {
      issuer: ISSUER,
      audience: AUDIENCE,
      algorithms: ['ES256'],
      clockToleranceSec: 5,
      adminClaim: 'is_admin',
    };
    const auth = createJwtAuthenticator({
      ...settings,
      key: { kind: 'publicKey', key: await exportSPKI(es.publicKey) },
    });
    expect(auth.description).toBe(
      `JWT (public key, issuer ${ISSUER}, audience ${AUDIENCE}, algorithms ES256)`,
    );
    expect(await auth.authenticate(request(`Bearer ${await token({ sub: 'bob', is_admin: true })}`))).toEqual(
      {
        subject: 'bob',
        namespace: 'sless-81b637d8fcd2c6da',
        admin: true,
      },
    );
    const remote = createJwtAuthenticator({
      ...settings,
      algorithms: ['ES256', 'EdDSA'],
      key: { kind: 'jwks', url: 'http://127.0.0.1:9/jwks.json' },
    });
    expect(remote.description).toBe(
      `JWT (JWKS http://127.0.0.1:9/jwks.json, issuer ${ISSUER}, audience ${AUDIENCE}, algorithms ES256,EdDSA)`,
    );
    // Port 9 (discard) refuses the connection: the keys are unreachable, a 503 and not a 401.
    expect(await refusal(remote, `Bearer ${await token({ sub: 'bob' })}`)).toBeInstanceOf(UnavailableError);
  });
});

describe('JWKS with a cool-down', () => {
  it('fails fast for the cool-down after the endpoint failed, not after a token named an unknown key', async () => {
    let requests = 0;
    let up = false;
    const jwk = { ...(await exportJWK(es.publicKey)), kid: 'k1', alg: 'ES256' };
    const server = createServer((_req, res) => {
      requests++;
      if (!up) {
        res.writeHead(500);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    let clock = 1_000_000;
    try {
      const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`);
      const auth = authenticator(jwksWithCooldown(url, { now: () => clock }));
      const signed = async (kid: string) =>
        `Bearer ${await new SignJWT({ sub: 'a' })
          .setProtectedHeader({ alg: 'ES256', kid })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setExpirationTime('5m')
          .sign(es.privateKey)}`;
      expect(await refusal(auth, await signed('k1'))).toBeInstanceOf(UnavailableError);
      expect(requests).toBe(1);
      // Within the cool-down: 503 at once, the endpoint is not asked again.
      up = true;
      clock += JWKS_FAILURE_COOLDOWN_MS - 1;
      expect((await refusal(auth, await signed('k1'))).message).toBe('signing keys are unreachable');
      expect(requests).toBe(1);
      // After it, the endpoint is tried again and answers.
      clock += 1;
      expect((await auth.authenticate(request(await signed('k1')))).subject).toBe('a');
      expect(requests).toBe(2);
      // An unknown kid is about the token: 401, and no cool-down for the next caller.
      expect((await refusal(auth, await signed('nope'))).message).toBe('no key matches the token');
      expect((await auth.authenticate(request(await signed('k1')))).subject).toBe('a');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('gives up on an endpoint slower than timeoutMs, then refuses at once, saying why', async () => {
    const jwk = { ...(await exportJWK(es.publicKey)), kid: 'k1', alg: 'ES256' };
    // Answers, but only after 800 ms: within the default 2 s, past the 100 ms asked for here.
    const server = createServer((_req, res) => {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: [jwk] }));
      }, 800);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`);
      const getKey = jwksWithCooldown(url, { timeoutMs: 100, now: () => 1_000_000 });
      const token = await new SignJWT({ sub: 'a' })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(es.privateKey);
      expect(await refusal(authenticator(getKey), `Bearer ${token}`)).toBeInstanceOf(UnavailableError);
      // The clock stands still, so the next request falls in the cool-down: refused without a fetch.
      await expect(getKey({ alg: 'ES256', kid: 'k1' }, { payload: '', signature: '' })).rejects.toThrow(
        new joseErrors.JWKSTimeout('signing keys were unreachable moments ago'),
      );
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
