/**
 * `POST …/sources/{name}/pin {"commit"}` and `DELETE …/sources/{name}/pin`: instant rollback to a
 * commit of the source's branch, and back to following the branch. Both answer once the source has
 * synced to the commit it now serves.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import type { ApiContext } from '../context.js';
import { errorResponses, nameParams } from '../schemas.js';
import type { NameParams } from './common.js';
import { syncResult } from './sources.js';

const pinBody = {
  type: 'object',
  required: ['commit'],
  additionalProperties: false,
  properties: { commit: { type: 'string', pattern: '^[0-9a-f]{40}$' } },
} as const;

export async function pinRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;
  const pin = async (ns: string, name: string, commit: string | undefined) => {
    if (!context.pinSource) throw new NotFoundError('pinning is not available here');
    const result = await context.pinSource(ns, name, commit);
    return {
      outcome: result?.outcome ?? 'unchanged',
      commit: result?.commit,
      message: result?.message,
      source: await context.store.get('GitSource', ns, name),
    };
  };

  app.post<{ Params: NameParams; Body: { commit: string } }>(
    '/v1/namespaces/:ns/sources/:name/pin',
    {
      schema: {
        summary: 'Pin a GitSource to a commit of its branch (instant rollback; no rebuild)',
        description:
          'Sets spec.ref.commit. A commit that is not on the branch is refused with 400. Answers after the sync to that commit.',
        tags: ['sources'],
        params: nameParams,
        body: pinBody,
        response: { 200: syncResult, ...errorResponses(400, 401, 403, 404, 413, 415, 502) },
      },
    },
    (request) => pin(request.params.ns, request.params.name, request.body.commit),
  );

  app.delete<{ Params: NameParams }>(
    '/v1/namespaces/:ns/sources/:name/pin',
    {
      schema: {
        summary: 'Unpin a GitSource: it follows its branch head again',
        tags: ['sources'],
        params: nameParams,
        response: { 200: syncResult, ...errorResponses(400, 401, 403, 404, 502) },
      },
    },
    (request) => pin(request.params.ns, request.params.name, undefined),
  );
}
