/**
 * `GET /v1/whoami`: who the caller is to the API and which namespaces it may look at, so that a
 * dashboard shows a tenant its own namespace and nothing else, and an admin every namespace that
 * holds objects.
 */
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.js';
import { errorResponses } from '../schemas.js';
import { COLLECTIONS } from './common.js';

const whoami = {
  type: 'object',
  required: ['subject', 'namespace', 'admin', 'namespaces', 'platform'],
  properties: {
    subject: { type: 'string' },
    namespace: { type: 'string' },
    admin: { type: 'boolean' },
    namespaces: { type: 'array', items: { type: 'string' } },
    platform: { type: 'string' },
  },
} as const;

export async function sessionRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;
  app.get(
    '/v1/whoami',
    {
      schema: {
        summary: 'The caller as the API sees it, and the namespaces it may read',
        tags: ['namespaces'],
        response: { 200: whoami, ...errorResponses(401) },
      },
    },
    async (request) => {
      const principal = request.principal;
      if (!principal) throw new Error('whoami is registered outside the authenticated routes');
      const namespaces = new Set<string>([principal.namespace]);
      if (principal.admin)
        for (const { kind } of COLLECTIONS)
          for (const object of await context.store.list(kind)) namespaces.add(object.metadata.namespace);
      return {
        subject: principal.subject,
        namespace: principal.namespace,
        admin: principal.admin,
        namespaces: [...namespaces].sort(),
        platform: context.platformName,
      };
    },
  );
}
