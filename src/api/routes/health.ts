/**
 * The routes outside `/v1` auth: liveness and readiness for probes and supervisors, the OpenAPI
 * document, and `/metrics`, which guards itself because its labels name every tenant's objects.
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Authenticator } from '../auth/authenticator.js';
import type { ApiContext } from '../context.js';
import { ForbiddenError } from '../errors.js';
import type { SlessMetrics } from '../metrics.js';
import type { RouteCollector } from '../openapi.js';
import { anyObject, errorBody } from '../schemas.js';

export interface HealthOptions {
  context: ApiContext;
  metrics: SlessMetrics;
  authenticator: Authenticator;
  /** A static scrape token accepted on /metrics besides an admin's JWT. */
  metricsToken?: string | undefined;
  collector: RouteCollector;
  version: string;
}

const statusBody = { type: 'object', properties: { status: { type: 'string' } } } as const;

/** Which replica reconciles: this one (`isLeader`), and the Lease's holder as last observed. */
export const leaderBody = {
  type: 'object',
  properties: {
    identity: { type: 'string' },
    holder: { type: 'string', nullable: true },
    isLeader: { type: 'boolean' },
  },
} as const;

const readyBody = {
  type: 'object',
  properties: { status: { type: 'string' }, leader: leaderBody },
} as const;

/**
 * Metrics carry every tenant's namespace, source and function names. With auth on, only an admin's
 * token (or the operator's scrape token) may read them; without auth the loopback guard applies.
 */
async function authorizeScrape(request: FastifyRequest, options: HealthOptions): Promise<void> {
  if (options.authenticator.trustsLoopback) return;
  const header = request.headers.authorization;
  if (options.metricsToken !== undefined && typeof header === 'string') {
    const given = Buffer.from(header);
    const expected = Buffer.from(`Bearer ${options.metricsToken}`);
    if (given.length === expected.length && timingSafeEqual(given, expected)) return;
  }
  const principal = await options.authenticator.authenticate(request);
  if (!principal.admin) throw new ForbiddenError('/metrics names every tenant: admins only');
}

/** Unauthenticated routes (probes and the OpenAPI document) and /metrics (admins when auth is on). */
export async function healthRoutes(app: FastifyInstance, options: HealthOptions): Promise<void> {
  app.get(
    '/healthz',
    { schema: { summary: 'Liveness', tags: ['health'], response: { 200: statusBody } } },
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Readiness: serving /fn/ and the API (a follower is ready too); says who leads',
        tags: ['health'],
        response: { 200: readyBody, 503: errorBody },
      },
    },
    async (_request, reply) => {
      if (!options.context.isReady()) return reply.code(503).send({ error: 'not ready' });
      return { status: 'ready', leader: options.context.leadership.info() };
    },
  );
  app.get(
    '/metrics',
    {
      schema: {
        summary: 'Prometheus metrics (text exposition format); admins only when auth is on',
        tags: ['health'],
      },
    },
    async (request, reply) => {
      await authorizeScrape(request, options);
      const text = await options.metrics.render();
      return reply.type(options.metrics.contentType()).send(text);
    },
  );
  app.get(
    '/openapi.json',
    {
      schema: {
        summary: 'This API as an OpenAPI 3 document',
        tags: ['health'],
        response: { 200: anyObject },
      },
    },
    async () => options.collector.document({ version: options.version }),
  );
}
