/**
 * `PUT`/`DELETE /v1/namespaces/{ns}/secrets/{name}` and `GET …/secrets[/{name}]`: the local
 * platform's secrets store. Values go in and never come out: a GET answers names, keys and a keyed
 * hash. Tenants reach their own namespace only (the `/v1` auth hook); on kube, secrets are
 * Kubernetes Secrets (`kubectl create secret`), so these answer 404 there.
 */
import type { FastifyInstance } from 'fastify';
import { BadRequestError, NotFoundError } from '../../core/errors.js';
import { SecretInputError, type SecretSummary } from '../../secrets/local-store.js';
import type { ApiContext } from '../context.js';
import { errorResponses, nameParams, nsParams } from '../schemas.js';
import type { NameParams, NsParams } from './common.js';

/** What the API needs of a secrets store. */
export interface SecretsApi {
  list(namespace: string): SecretSummary[];
  summary(namespace: string, name: string): SecretSummary | undefined;
  set(
    namespace: string,
    name: string,
    data: Record<string, Uint8Array>,
  ): { changed: boolean; summary: SecretSummary };
  delete(namespace: string, name: string): boolean;
}

const KEY = '^[-._a-zA-Z0-9]+$';

const secretBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    /** As a Kubernetes Secret: base64 values. */
    data: {
      type: 'object',
      maxProperties: 64,
      propertyNames: { pattern: KEY, maxLength: 253 },
      additionalProperties: { type: 'string', pattern: '^[A-Za-z0-9+/]*={0,2}$' },
    },
    /** Plain text values. */
    stringData: {
      type: 'object',
      maxProperties: 64,
      propertyNames: { pattern: KEY, maxLength: 253 },
      additionalProperties: { type: 'string' },
    },
  },
} as const;

const summaryBody = {
  type: 'object',
  required: ['namespace', 'name', 'keys', 'hash', 'updatedAt'],
  additionalProperties: false,
  properties: {
    namespace: { type: 'string' },
    name: { type: 'string' },
    keys: { type: 'array', items: { type: 'string' } },
    hash: { type: 'string' },
    managedBy: { type: 'string' },
    updatedAt: { type: 'string' },
  },
} as const;

interface SecretBody {
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

export async function secretRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const store = (): SecretsApi => {
    const secrets = options.context.secrets;
    if (!secrets)
      throw new NotFoundError(
        'secrets are Kubernetes Secrets on this platform: kubectl create secret generic NAME -n NAMESPACE',
      );
    return secrets;
  };

  app.get<{ Params: NsParams }>(
    '/v1/namespaces/:ns/secrets',
    {
      schema: {
        summary: "List a namespace's secrets: names, keys and a hash, never values",
        tags: ['secrets'],
        params: nsParams,
        response: {
          200: {
            type: 'object',
            required: ['items'],
            properties: { items: { type: 'array', items: summaryBody } },
          },
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => ({ items: store().list(request.params.ns) }),
  );

  app.get<{ Params: NameParams }>(
    '/v1/namespaces/:ns/secrets/:name',
    {
      schema: {
        summary: 'One secret: its keys and a hash, never its values',
        tags: ['secrets'],
        params: nameParams,
        response: { 200: summaryBody, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const summary = store().summary(request.params.ns, request.params.name);
      if (!summary) throw new NotFoundError(`secret ${request.params.name} not found`);
      return summary;
    },
  );

  app.put<{ Params: NameParams; Body: SecretBody }>(
    '/v1/namespaces/:ns/secrets/:name',
    {
      schema: {
        summary: 'Create or replace a secret (values in `data`, base64, or `stringData`)',
        description:
          'Functions in this namespace that reference it roll to the new values. The answer holds keys and a hash only.',
        tags: ['secrets'],
        params: nameParams,
        body: secretBody,
        response: {
          200: summaryBody,
          201: summaryBody,
          ...errorResponses(400, 401, 403, 404, 409, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { ns, name } = request.params;
      const data: Record<string, Uint8Array> = {};
      for (const [key, value] of Object.entries(request.body.data ?? {}))
        data[key] = Buffer.from(value, 'base64');
      for (const [key, value] of Object.entries(request.body.stringData ?? {})) {
        if (key in data) throw new BadRequestError(`key "${key}" is in both data and stringData`);
        data[key] = Buffer.from(value, 'utf8');
      }
      const existed = store().summary(ns, name) !== undefined;
      try {
        const { summary } = store().set(ns, name, data);
        reply.code(existed ? 200 : 201);
        return summary;
      } catch (error) {
        if (error instanceof SecretInputError) throw new BadRequestError(error.message);
        throw error;
      }
    },
  );

  app.delete<{ Params: NameParams }>(
    '/v1/namespaces/:ns/secrets/:name',
    {
      schema: {
        summary: 'Delete a secret; functions that reference it keep serving what runs, and are not Ready',
        tags: ['secrets'],
        params: nameParams,
        response: {
          200: { type: 'object', properties: { deleted: { type: 'string' } } },
          ...errorResponses(400, 401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      const { ns, name } = request.params;
      if (!store().delete(ns, name)) throw new NotFoundError(`secret ${name} not found`);
      return { deleted: name };
    },
  );
}
