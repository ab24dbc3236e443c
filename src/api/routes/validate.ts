/**
 * A dry run for clients (a CI job before a push): a resource is checked against the same schema the
 * API applies, and nothing is written.
 */
import type { FastifyInstance } from 'fastify';
import { anyObject, anyResourceBody, errorResponses, nsParams } from '../schemas.js';
import type { NsParams } from './common.js';

/**
 * `POST /v1/namespaces/{ns}/validate`: a dry run of any resource against the one schema, as CI would
 * run it on a manifest before pushing. 200 with the defaulted object, or 400 `field: reason`.
 */
export async function validateRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Params: NsParams; Body: Record<string, unknown> }>(
    '/v1/namespaces/:ns/validate',
    {
      schema: {
        summary: 'Validate one resource (any kind) without applying it',
        tags: ['validate'],
        params: nsParams,
        body: anyResourceBody(),
        response: {
          200: { type: 'object', properties: { valid: { type: 'boolean' }, object: anyObject } },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request) => ({ valid: true, object: request.body }),
  );
}
