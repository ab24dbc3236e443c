/**
 * The GitSource routes: registering, removing and syncing a repository. They enforce what a store
 * write alone would not (the namespace's source quota, and that only an admin may point a source at
 * a path on this machine); the polling itself is the controller's.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import { DEFAULT_QUOTAS } from '../../core/quotas.js';
import type { GitSource } from '../../core/resources.js';
import type { ApiContext } from '../context.js';
import { ForbiddenError } from '../errors.js';
import { anyObject, errorResponses, nameParams, nsParams, resourceBody } from '../schemas.js';
import { inNamespace, type NameParams, type NsParams } from './common.js';

function isLocalPath(url: string): boolean {
  return !/^https?:\/\//.test(url);
}

/** A sync's outcome and the source after it (also the answer of the pin routes). */
export const syncResult = {
  type: 'object',
  properties: {
    outcome: { type: 'string' },
    commit: { type: 'string' },
    reason: { type: 'string' },
    message: { type: 'string' },
    source: anyObject,
  },
} as const;

/**
 * Registering, removing and syncing GitSources. Registering only applies the object to the store;
 * the controller watches the store and starts polling by itself.
 */
export async function sourceRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;

  app.post<{ Params: NsParams; Body: Record<string, unknown> }>(
    '/v1/namespaces/:ns/sources',
    {
      schema: {
        summary: 'Register (or update) a GitSource: a full document or {name, spec}',
        tags: ['sources'],
        params: nsParams,
        body: resourceBody('GitSource'),
        response: { 200: anyObject, 201: anyObject, ...errorResponses(400, 401, 403, 404, 413, 415) },
      },
    },
    async (request, reply) => {
      const source = inNamespace<GitSource>(request.body, request.params.ns);
      // A path on this machine reads whatever repository sits there: only an admin may point at one.
      if (isLocalPath(source.spec.url) && !request.principal?.admin)
        throw new ForbiddenError('spec.url: a local repository path can only be registered by an admin');
      const existed = await context.store.get('GitSource', source.metadata.namespace, source.metadata.name);
      const { maxSources } = context.quotas ?? DEFAULT_QUOTAS;
      if (!existed) {
        const count = (await context.store.list('GitSource', { namespace: source.metadata.namespace }))
          .length;
        if (count >= maxSources)
          throw new ForbiddenError(
            `quota: namespace ${source.metadata.namespace} already has ${count} of its ${maxSources} GitSources`,
          );
      }
      const applied = await context.store.apply(source);
      return reply.code(existed ? 200 : 201).send(applied);
    },
  );

  app.delete<{ Params: NameParams }>(
    '/v1/namespaces/:ns/sources/:name',
    {
      schema: {
        summary: 'Remove a GitSource; what it applied is pruned with it',
        tags: ['sources'],
        params: nameParams,
        response: { 204: { type: 'null' }, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const deleted = await context.store.delete('GitSource', request.params.ns, request.params.name);
      if (!deleted)
        throw new NotFoundError(`GitSource ${request.params.ns}/${request.params.name} not found`);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: NameParams }>(
    '/v1/namespaces/:ns/sources/:name/sync',
    {
      schema: {
        summary: 'Sync a GitSource now and wait for the result',
        tags: ['sources'],
        params: nameParams,
        response: { 200: syncResult, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { ns, name } = request.params;
      const source = await context.store.get('GitSource', ns, name);
      if (!source) throw new NotFoundError(`GitSource ${ns}/${name} not found`);
      const result = await context.syncNow(ns, name, { force: true });
      const after = await context.store.get('GitSource', ns, name);
      return {
        outcome: result?.outcome ?? 'unchanged',
        commit: result?.commit,
        reason: result?.reason,
        message: result?.message,
        source: after,
      };
    },
  );
}
