/**
 * The read side of the API for every kind: list and get within a namespace, generated from one
 * table so that every kind reads the same way.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import type { ApiContext } from '../context.js';
import { anyObject, errorResponses, listBody, nameParams, nsParams } from '../schemas.js';
import { COLLECTIONS, type NameParams, type NsParams } from './common.js';

/** `GET …/{collection}` and `GET …/{collection}/{name}` for every kind. */
export async function resourceReadRoutes(
  app: FastifyInstance,
  options: { context: ApiContext },
): Promise<void> {
  const { context } = options;
  for (const { collection, kind, tag } of COLLECTIONS) {
    app.get<{ Params: NsParams }>(
      `/v1/namespaces/:ns/${collection}`,
      {
        schema: {
          summary: `List ${kind} objects`,
          tags: [tag],
          params: nsParams,
          response: { 200: listBody, ...errorResponses(400, 401, 403, 404) },
        },
      },
      async (request) => ({ items: await context.store.list(kind, { namespace: request.params.ns }) }),
    );
    app.get<{ Params: NameParams }>(
      `/v1/namespaces/:ns/${collection}/:name`,
      {
        schema: {
          summary: `Get one ${kind} with its status`,
          tags: [tag],
          params: nameParams,
          response: { 200: anyObject, ...errorResponses(400, 401, 403, 404) },
        },
      },
      async (request) => {
        const found = await context.store.get(kind, request.params.ns, request.params.name);
        if (!found) throw new NotFoundError(`${kind} ${request.params.ns}/${request.params.name} not found`);
        return found;
      },
    );
  }
}
