/**
 * The OpenAPI 3 document, built from the schemas the routes register (collected by an onRoute hook),
 * so it cannot drift from what the server validates.
 */
import type { FastifyInstance, HTTPMethods, RouteOptions } from 'fastify';
import { BODY_KIND_KEYWORD } from './schemas.js';

declare module 'fastify' {
  /** Documentation-only keys on route schemas; validation ignores them, openapi.ts reads them. */
  interface FastifySchema {
    summary?: string;
    description?: string;
    tags?: string[];
  }
}

interface CollectedRoute {
  method: string;
  url: string;
  schema: RouteSchema | undefined;
}

interface RouteSchema {
  summary?: string;
  description?: string;
  tags?: string[];
  params?: JsonSchema;
  querystring?: JsonSchema;
  headers?: JsonSchema;
  body?: JsonSchema;
  response?: Record<string, JsonSchema>;
  security?: Array<Record<string, string[]>>;
}

type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: '3.0.3';
  info: { title: string; version: string; description: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
}

export interface OpenApiOperation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters: Array<{ name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: JsonSchema }>;
  requestBody?: { required: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }> }>;
  security?: Array<Record<string, string[]>>;
}

/** Collects routes as they are registered; call before any route is added. */
export class RouteCollector {
  private readonly routes: CollectedRoute[] = [];

  attach(app: FastifyInstance): void {
    app.addHook('onRoute', (route: RouteOptions) => {
      const methods = (Array.isArray(route.method) ? route.method : [route.method]) as HTTPMethods[];
      for (const method of methods) {
        // HEAD mirrors GET automatically; wildcards (the proxy's tail) have no OpenAPI form.
        if (method === 'HEAD' || route.url.includes('*')) continue;
        this.routes.push({ method, url: route.url, schema: route.schema as RouteSchema | undefined });
      }
    });
  }

  document(info: { version: string }): OpenApiDocument {
    const paths: OpenApiDocument['paths'] = {};
    for (const route of this.routes) {
      const path = route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const operations = paths[path] ?? {};
      paths[path] = operations;
      const op = operation(route, path);
      // Everything under /v1 but the webhooks (signed instead) needs a bearer token.
      if (path.startsWith('/v1/') && !path.startsWith('/v1/webhooks/')) op.security ??= [{ bearer: [] }];
      operations[route.method.toLowerCase()] = op;
    }
    return {
      openapi: '3.0.3',
      info: {
        title: 'sless API',
        version: info.version,
        description:
          'GitOps serverless functions. `/v1` needs a Bearer JWT (unless local mode runs without auth); ' +
          'webhooks are authenticated by their signature; `/fn/…`, `/healthz`, `/readyz` and `/metrics` are public.',
      },
      paths,
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
        schemas: {
          Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
        },
      },
    };
  }
}

function operation(route: CollectedRoute, path: string): OpenApiOperation {
  const schema = route.schema ?? {};
  const parameters: OpenApiOperation['parameters'] = [];
  const paramSchemas = (schema.params?.properties ?? {}) as Record<string, JsonSchema>;
  for (const match of path.matchAll(/\{([A-Za-z0-9_]+)\}/g)) {
    const name = match[1] as string;
    parameters.push({ name, in: 'path', required: true, schema: paramSchemas[name] ?? { type: 'string' } });
  }
  for (const [where, part] of [
    ['query', schema.querystring],
    ['header', schema.headers],
  ] as const) {
    const required = new Set((part?.required ?? []) as string[]);
    for (const [name, s] of Object.entries((part?.properties ?? {}) as Record<string, JsonSchema>))
      parameters.push({ name, in: where, required: required.has(name), schema: s });
  }
  const op: OpenApiOperation = {
    operationId: operationId(route.method, path),
    parameters,
    responses: responses(schema.response),
  };
  if (schema.summary) op.summary = schema.summary;
  if (schema.description) op.description = schema.description;
  if (schema.tags) op.tags = schema.tags;
  if (schema.security) op.security = schema.security;
  if (schema.body) {
    const { [BODY_KIND_KEYWORD]: _marker, ...body } = schema.body;
    op.requestBody = { required: true, content: { 'application/json': { schema: body } } };
  }
  return op;
}

function responses(declared: Record<string, JsonSchema> | undefined): OpenApiOperation['responses'] {
  if (!declared || Object.keys(declared).length === 0) return { default: { description: 'response' } };
  const out: OpenApiOperation['responses'] = {};
  for (const [code, s] of Object.entries(declared)) {
    const isError = /^[45]/.test(code);
    out[code.toUpperCase()] = {
      description: isError ? 'error' : 'success',
      content: { 'application/json': { schema: isError ? { $ref: '#/components/schemas/Error' } : s } },
    };
  }
  return out;
}

function operationId(method: string, path: string): string {
  const words = path
    .split('/')
    .filter(Boolean)
    .map((part) =>
      part
        .replace(/[{}]/g, '')
        .replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase()),
    );
  return [method.toLowerCase(), ...words.map((w) => w.charAt(0).toUpperCase() + w.slice(1))].join('');
}
