/**
 * `GET /v1/namespaces/{ns}/invocations[/{id}]`, `GET …/dead-letters` and
 * `POST …/invocations/{id}/replay`: asynchronous invocations as their callers see them, their state,
 * attempts and result. The stored request's headers and body are never answered (they may carry a
 * caller's credentials for the function), nor a callback URL's path and query.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import type { InvocationRecord, InvocationState } from '../../core/invocations.js';
import type { ApiContext } from '../context.js';
import { anyObject, errorResponses, nsParams } from '../schemas.js';
import type { NsParams } from './common.js';

/** What the API needs of the asynchronous invocations. */
export interface InvocationsApi {
  get(namespace: string, id: string): Promise<InvocationRecord | undefined>;
  list(namespace: string, options: { state?: InvocationState; limit: number }): Promise<InvocationRecord[]>;
  replay(namespace: string, id: string): Promise<InvocationRecord>;
}

const STATES: InvocationState[] = ['queued', 'running', 'succeeded', 'failed', 'dead-lettered'];

const idParams = {
  type: 'object',
  required: ['ns', 'id'],
  properties: {
    ns: nsParams.properties.ns,
    id: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[0-9a-f-]+$' },
  },
} as const;

const listQuery = {
  type: 'object',
  properties: {
    state: { type: 'string', enum: STATES },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
  },
} as const;

const listBody = {
  type: 'object',
  required: ['items'],
  properties: { items: { type: 'array', items: anyObject } },
} as const;

/** An invocation as the API answers it. */
export function invocationView(record: InvocationRecord): Record<string, unknown> {
  const body = Buffer.from(record.request.body, 'base64');
  let callback: Record<string, unknown> | undefined;
  if (record.callback) {
    const { url, ...rest } = record.callback;
    callback = { origin: new URL(url).origin, ...rest };
  }
  return {
    id: record.id,
    namespace: record.namespace,
    function: record.function,
    state: record.state,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    request: { method: record.request.method, path: record.request.path, bodyBytes: body.length },
    maxAttempts: record.maxAttempts,
    attempts: record.attempts,
    ...(record.nextAttemptAt ? { nextAttemptAt: record.nextAttemptAt } : {}),
    ...(record.result ? { result: record.result } : {}),
    ...(callback ? { callback } : {}),
    ...(record.replays ? { replays: record.replays } : {}),
  };
}

export async function invocationRoutes(
  app: FastifyInstance,
  options: { context: ApiContext },
): Promise<void> {
  const invocations = (): InvocationsApi => {
    const api = options.context.invocations;
    if (!api) throw new NotFoundError('asynchronous invocations are not served on this platform');
    return api;
  };

  app.get<{ Params: NsParams; Querystring: { state?: InvocationState; limit: number } }>(
    '/v1/namespaces/:ns/invocations',
    {
      schema: {
        summary: "A namespace's asynchronous invocations, newest first (optionally of one state)",
        tags: ['invocations'],
        params: nsParams,
        querystring: listQuery,
        response: { 200: listBody, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { state, limit } = request.query;
      const items = await invocations().list(request.params.ns, { ...(state ? { state } : {}), limit });
      return { items: items.map(invocationView) };
    },
  );

  app.get<{ Params: NsParams; Querystring: { limit: number } }>(
    '/v1/namespaces/:ns/dead-letters',
    {
      schema: {
        summary: 'The dead-letter list: invocations that failed every attempt, newest first',
        tags: ['invocations'],
        params: nsParams,
        querystring: { type: 'object', properties: { limit: listQuery.properties.limit } },
        response: { 200: listBody, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const items = await invocations().list(request.params.ns, {
        state: 'dead-lettered',
        limit: request.query.limit,
      });
      return { items: items.map(invocationView) };
    },
  );

  app.get<{ Params: NsParams & { id: string } }>(
    '/v1/namespaces/:ns/invocations/:id',
    {
      schema: {
        summary: 'One asynchronous invocation: its state, attempts and result',
        tags: ['invocations'],
        params: idParams,
        response: { 200: anyObject, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { ns, id } = request.params;
      const record = await invocations().get(ns, id);
      if (!record) throw new NotFoundError(`invocation ${ns}/${id} not found`);
      return invocationView(record);
    },
  );

  app.post<{ Params: NsParams & { id: string } }>(
    '/v1/namespaces/:ns/invocations/:id/replay',
    {
      schema: {
        summary: 'Queues a failed or dead-lettered invocation again, with a fresh attempt budget',
        tags: ['invocations'],
        params: idParams,
        response: { 202: anyObject, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const { ns, id } = request.params;
      const record = await invocations().replay(ns, id);
      return reply
        .code(202)
        .header('location', `/v1/namespaces/${ns}/invocations/${id}`)
        .send(invocationView(record));
    },
  );
}
