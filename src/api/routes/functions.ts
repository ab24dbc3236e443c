/**
 * The Function routes beyond plain reads: a function's recent builds with their log tails, and
 * asking for a failed build to be tried again.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { commitPath } from '../../core/revision-ref.js';
import type { ApiContext } from '../context.js';
import { anyObject, errorResponses, nameParams } from '../schemas.js';
import type { NameParams } from './common.js';

const buildsQuery = {
  type: 'object',
  properties: { tail: { type: 'integer', minimum: 0, maximum: 1000, default: 50 } },
} as const;

/** Build history (with log tails) and the rebuild action; list/get live in resources.ts. */
export async function functionRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;

  const getFunction = async (ns: string, name: string): Promise<SlessFunction> => {
    const fn = await context.store.get('Function', ns, name);
    if (fn?.kind !== 'Function') throw new NotFoundError(`Function ${ns}/${name} not found`);
    return fn;
  };

  app.get<{ Params: NameParams; Querystring: { tail: number } }>(
    '/v1/namespaces/:ns/functions/:name/builds',
    {
      schema: {
        summary: 'Recent builds of a function, newest first, each with the last `tail` log lines',
        tags: ['functions'],
        params: nameParams,
        querystring: buildsQuery,
        response: {
          200: { type: 'object', properties: { items: { type: 'array', items: anyObject } } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const { ns, name } = request.params;
      const fn = await getFunction(ns, name);
      const history = [...(context.buildHistory?.(ns, name) ?? [])];
      const last = fn.status?.lastBuild;
      // Status may know a build the history does not (e.g. one running now, or before a restart).
      if (last && !history.some((b) => b.buildKey === last.buildKey && b.startedAt === last.startedAt))
        history.unshift(last);
      history.sort((a, b) => b.startedAt.localeCompare(a.startedAt));
      // Each successful build can be called at its commit while it is kept (`name@sha12`).
      const base = fn.status?.url;
      return {
        items: history.map((b) => ({
          ...withTail(b, request.query.tail),
          ...(base && b.result === 'Succeeded' ? { url: commitPath(base, b.commit) } : {}),
        })),
      };
    },
  );

  app.post<{ Params: NameParams }>(
    '/v1/namespaces/:ns/functions/:name/rebuild',
    {
      schema: {
        summary: 'Forget a failed build so the function is built again',
        tags: ['functions'],
        params: nameParams,
        response: {
          202: { type: 'object', properties: { status: { type: 'string' } } },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      await getFunction(request.params.ns, request.params.name);
      context.retryBuild(request.params.ns, request.params.name);
      return reply.code(202).send({ status: 'rebuild requested' });
    },
  );
}

function withTail(build: BuildRecord, lines: number): BuildRecord {
  if (build.logTail === undefined) return build;
  const all = build.logTail.split('\n');
  return { ...build, logTail: lines === 0 ? '' : all.slice(-lines).join('\n') };
}
