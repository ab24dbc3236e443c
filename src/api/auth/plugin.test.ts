/**
 * requireAuth on a Fastify app, with a stub authenticator: a tenant acts only in its own namespace, an
 * admin anywhere, a caller without a principal gets a 401 with a bearer challenge, and a refused request
 * never reaches its handler.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandling, UnauthorizedError } from '../errors.js';
import type { Authenticator, Principal } from './authenticator.js';
import { requireAuth } from './plugin.js';

/** Principals by bearer value; the JWT side is tested in jwt.test.ts, this is the authorisation rule. */
const principals: Record<string, Principal> = {
  alice: { subject: 'alice', namespace: 'sless-2bd806c97f0e00af', admin: false },
  root: { subject: 'root', namespace: 'sless-4813494d137e1631', admin: true },
};
const byHeader: Authenticator = {
  description: 'test',
  async authenticate(request) {
    const principal = principals[request.headers.authorization ?? ''];
    if (!principal) throw new UnauthorizedError('missing bearer token');
    return principal;
  },
};

describe('requireAuth', () => {
  let app: FastifyInstance;
  let handled = 0;

  beforeAll(async () => {
    app = Fastify();
    installErrorHandling(app);
    await app.register(async (scope) => {
      requireAuth(scope, byHeader);
      const answer = async (request: { principal?: Principal }) => {
        handled++;
        return { subject: request.principal?.subject };
      };
      scope.get('/v1/namespaces/:ns/things', answer);
      scope.post('/v1/namespaces/:ns/things', answer);
      scope.get('/v1/whoami', answer);
    });
    await app.ready();
  });

  afterAll(() => app.close());

  const call = (url: string, who?: string, method: 'GET' | 'POST' = 'GET') =>
    app.inject({
      url,
      method,
      headers: who ? { authorization: who } : {},
      ...(method === 'POST' ? { payload: {} } : {}),
    });

  it('lets a tenant act in its own namespace only, before the handler runs', async () => {
    const own = await call('/v1/namespaces/sless-2bd806c97f0e00af/things', 'alice');
    expect(own.statusCode).toBe(200);
    expect(own.json()).toEqual({ subject: 'alice' });
    const before = handled;
    for (const ns of ['default', 'sless-81b637d8fcd2c6da', 'sless-2bd806c97f0e00af-x'])
      for (const method of ['GET', 'POST'] as const) {
        const other = await call(`/v1/namespaces/${ns}/things`, 'alice', method);
        expect(other.statusCode, `${method} ${ns}`).toBe(403);
        expect(other.json()).toEqual({
          error: `namespace ${ns} is not yours (yours is sless-2bd806c97f0e00af)`,
        });
      }
    expect(handled).toBe(before);
  });

  it('lets an admin act anywhere, and routes without a namespace need only a principal', async () => {
    expect((await call('/v1/namespaces/default/things', 'root')).statusCode).toBe(200);
    expect((await call('/v1/namespaces/sless-2bd806c97f0e00af/things', 'root', 'POST')).statusCode).toBe(200);
    expect((await call('/v1/whoami', 'alice')).json()).toEqual({ subject: 'alice' });
  });

  it('refuses a caller without a principal with 401, wherever it goes', async () => {
    const before = handled;
    for (const url of ['/v1/whoami', '/v1/namespaces/default/things']) {
      const response = await call(url);
      expect(response.statusCode, url).toBe(401);
      expect(response.headers['www-authenticate']).toBe('Bearer realm="sless"');
    }
    expect(handled).toBe(before);
  });
});

// Its own describe, with no shared setup: if installing the hook fails, this test fails (a failing
// beforeAll would only skip the tests above).
describe('requireAuth on a fresh app', () => {
  it('guards an app it is installed on from the first request (set up inside the test, not a hook)', async () => {
    const own = Fastify();
    installErrorHandling(own);
    requireAuth(own, byHeader);
    own.get('/v1/namespaces/:ns/x', async () => ({ ok: true }));
    try {
      expect((await own.inject({ url: '/v1/namespaces/default/x' })).statusCode).toBe(401);
      expect(
        (await own.inject({ url: '/v1/namespaces/default/x', headers: { authorization: 'alice' } }))
          .statusCode,
      ).toBe(403);
      expect(
        (await own.inject({ url: '/v1/namespaces/default/x', headers: { authorization: 'root' } }))
          .statusCode,
      ).toBe(200);
    } finally {
      await own.close();
    }
  });
});
