import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import { DNS_LABEL_PATTERN } from '../../core/naming.js';
import type { KindName } from '../../core/schemas.js';
import type { ApiContext } from '../context.js';

const nsParams = {
  type: 'object',
  required: ['ns'],
  properties: { ns: { type: 'string', pattern: DNS_LABEL_PATTERN, maxLength: 63 } },
} as const;

const nameParams = {
  type: 'object',
  required: ['ns', 'name'],
  properties: {
    ns: { type: 'string', pattern: DNS_LABEL_PATTERN, maxLength: 63 },
    name: { type: 'string', pattern: DNS_LABEL_PATTERN, maxLength: 63 },
  },
} as const;

const COLLECTIONS: Record<string, KindName> = {
  sources: 'GitSource',
  functions: 'Function',
  triggers: 'Trigger',
  jobs: 'FunctionJob',
};

interface NsParams {
  ns: string;
}
interface NameParams extends NsParams {
  name: string;
}

/** Read-only views of every kind, plus the sync and rebuild actions. */
export async function statusRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;
  for (const [collection, kind] of Object.entries(COLLECTIONS)) {
    app.get<{ Params: NsParams }>(
      `/v1/namespaces/:ns/${collection}`,
      { schema: { params: nsParams } },
      async (request) => {
        const items = await context.store.list(kind, { namespace: request.params.ns });
        return { items };
      },
    );
    app.get<{ Params: NameParams }>(
      `/v1/namespaces/:ns/${collection}/:name`,
      { schema: { params: nameParams } },
      async (request) => {
        const found = await context.store.get(kind, request.params.ns, request.params.name);
        if (!found) throw new NotFoundError(`${kind} ${request.params.ns}/${request.params.name} not found`);
        return found;
      },
    );
  }

  app.get<{ Params: NameParams }>(
    '/v1/namespaces/:ns/functions/:name/builds',
    { schema: { params: nameParams } },
    async (request) => {
      const fn = await context.store.get('Function', request.params.ns, request.params.name);
      if (fn?.kind !== 'Function')
        throw new NotFoundError(`Function ${request.params.ns}/${request.params.name} not found`);
      return { items: fn.status?.lastBuild ? [fn.status.lastBuild] : [] };
    },
  );

  app.post<{ Params: NameParams }>(
    '/v1/namespaces/:ns/functions/:name/rebuild',
    { schema: { params: nameParams } },
    async (request, reply) => {
      const fn = await context.store.get('Function', request.params.ns, request.params.name);
      if (!fn) throw new NotFoundError(`Function ${request.params.ns}/${request.params.name} not found`);
      context.retryBuild(request.params.ns, request.params.name);
      return reply.code(202).send({ status: 'rebuild requested' });
    },
  );

  app.post<{ Params: NameParams }>(
    '/v1/namespaces/:ns/sources/:name/sync',
    { schema: { params: nameParams } },
    async (request) => {
      const source = await context.store.get('GitSource', request.params.ns, request.params.name);
      if (!source) throw new NotFoundError(`GitSource ${request.params.ns}/${request.params.name} not found`);
      const result = await context.syncNow(request.params.ns, request.params.name, { force: true });
      const after = await context.store.get('GitSource', request.params.ns, request.params.name);
      return {
        outcome: result?.outcome ?? 'unchanged',
        commit: result?.commit,
        message: result?.message,
        source: after,
      };
    },
  );
}
