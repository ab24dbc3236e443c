import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.js';
import type { SlessMetrics } from '../metrics.js';
import type { RouteCollector } from '../openapi.js';
import { anyObject, errorBody } from '../schemas.js';

export interface HealthOptions {
  context: ApiContext;
  metrics: SlessMetrics;
  collector: RouteCollector;
  version: string;
}

const statusBody = { type: 'object', properties: { status: { type: 'string' } } } as const;

/** Public, unauthenticated routes: probes, Prometheus and the OpenAPI document. */
export async function healthRoutes(app: FastifyInstance, options: HealthOptions): Promise<void> {
  app.get(
    '/healthz',
    { schema: { summary: 'Liveness', tags: ['health'], response: { 200: statusBody } } },
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    {
      schema: { summary: 'Readiness', tags: ['health'], response: { 200: statusBody, 503: errorBody } },
    },
    async (_request, reply) => {
      if (!options.context.isReady()) return reply.code(503).send({ error: 'not ready' });
      return { status: 'ready' };
    },
  );
  app.get(
    '/metrics',
    { schema: { summary: 'Prometheus metrics (text exposition format)', tags: ['health'] } },
    async (_request, reply) => {
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
