/**
 * Namespace routes: creating a tenant's namespace idempotently, and saying which replica leads (the
 * one that reconciles).
 */
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.js';
import { errorResponses, nsParams } from '../schemas.js';
import type { NsParams } from './common.js';
import { leaderBody } from './health.js';

const ensured = {
  type: 'object',
  required: ['namespace', 'created'],
  properties: { namespace: { type: 'string' }, created: { type: 'boolean' } },
} as const;

/**
 * `POST /v1/namespaces/{ns}/ensure`: 201 when this call created the namespace, 200 when it existed.
 * Idempotent; under concurrency exactly one caller sees 201 (the registry guarantees it).
 */
export async function namespaceRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  app.post<{ Params: NsParams }>(
    '/v1/namespaces/:ns/ensure',
    {
      schema: {
        summary: 'Create the namespace if it does not exist',
        tags: ['namespaces'],
        params: nsParams,
        response: { 200: ensured, 201: ensured, ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const created = await options.context.ensureNamespace(request.params.ns);
      return reply.code(created ? 201 : 200).send({ namespace: request.params.ns, created });
    },
  );

  app.get(
    '/v1/leader',
    {
      schema: {
        summary: 'Which replica reconciles: every replica serves, one leader (a Lease on kube) reconciles',
        tags: ['health'],
        response: { 200: leaderBody, ...errorResponses(401) },
      },
    },
    async () => options.context.leadership.info(),
  );
}
