/**
 * Writes of Triggers and FunctionJobs made through the API rather than git, with the rules that
 * keep the two apart: an object a GitSource manages cannot be changed or deleted here, and an API
 * object cannot pass itself off as one.
 */
import type { FastifyInstance } from 'fastify';
import { ConflictError, NotFoundError } from '../../core/errors.js';
import { type AnyResource, LABEL_SOURCE } from '../../core/resources.js';
import type { KindName } from '../../core/schemas.js';
import type { ApiContext } from '../context.js';
import { anyObject, errorResponses, nameParams, nsParams, resourceBody } from '../schemas.js';
import { inNamespace, type NameParams, type NsParams } from './common.js';

/**
 * API-side Triggers and FunctionJobs (beside those a repository declares). They must name an
 * existing Function (404 otherwise), and may not take over an object a GitSource manages (409):
 * the next sync would silently undo such a change.
 */
export async function triggerJobRoutes(
  app: FastifyInstance,
  options: { context: ApiContext },
): Promise<void> {
  const { context } = options;
  const kinds: ReadonlyArray<{ collection: string; kind: KindName & ('Trigger' | 'FunctionJob') }> = [
    { collection: 'triggers', kind: 'Trigger' },
    { collection: 'jobs', kind: 'FunctionJob' },
  ];

  const managedBy = (object: AnyResource | undefined): string | undefined =>
    object?.metadata.labels?.[LABEL_SOURCE];

  for (const { collection, kind } of kinds) {
    app.post<{ Params: NsParams; Body: Record<string, unknown> }>(
      `/v1/namespaces/:ns/${collection}`,
      {
        schema: {
          summary: `Create or update an API-managed ${kind}: a full document or {name, spec}`,
          tags: [collection],
          params: nsParams,
          body: resourceBody(kind),
          response: { 200: anyObject, 201: anyObject, ...errorResponses(400, 401, 403, 404, 409, 413, 415) },
        },
      },
      async (request, reply) => {
        const object = inNamespace<AnyResource>(request.body, request.params.ns);
        const spec = object.spec as { function: string };
        const fn = await context.store.get('Function', object.metadata.namespace, spec.function);
        if (!fn)
          throw new NotFoundError(
            `spec.function: Function ${object.metadata.namespace}/${spec.function} not found`,
          );
        const existing = await context.store.get(kind, object.metadata.namespace, object.metadata.name);
        const owner = managedBy(existing);
        if (owner !== undefined)
          throw new ConflictError(
            `${kind} ${object.metadata.namespace}/${object.metadata.name} is managed by GitSource ${owner}; change it in git`,
          );
        // The label is the store's marker of who owns an object; an API object must not claim one.
        if (object.metadata.labels?.[LABEL_SOURCE] !== undefined)
          throw new ConflictError(`metadata.labels.${LABEL_SOURCE}: is set by GitSources only`);
        const applied = await context.store.apply(object);
        return reply.code(existing ? 200 : 201).send(applied);
      },
    );

    app.delete<{ Params: NameParams }>(
      `/v1/namespaces/:ns/${collection}/:name`,
      {
        schema: {
          summary: `Delete an API-managed ${kind}`,
          tags: [collection],
          params: nameParams,
          response: { 204: { type: 'null' }, ...errorResponses(400, 401, 403, 404, 409) },
        },
      },
      async (request, reply) => {
        const { ns, name } = request.params;
        const existing = await context.store.get(kind, ns, name);
        if (!existing) throw new NotFoundError(`${kind} ${ns}/${name} not found`);
        const owner = managedBy(existing);
        if (owner !== undefined)
          throw new ConflictError(
            `${kind} ${ns}/${name} is managed by GitSource ${owner}; remove it from git`,
          );
        await context.store.delete(kind, ns, name);
        return reply.code(204).send();
      },
    );
  }
}
