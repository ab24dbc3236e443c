import type { FastifyError, FastifyInstance } from 'fastify';
import { SlessError } from '../core/errors.js';

/**
 * One error shape, `{ "error": "…" }`. Client mistakes map to 4xx with their message; only a genuine
 * server fault is a 500, and its details stay in the log.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | SlessError | Error, request, reply) => {
    if (error instanceof SlessError) {
      return reply.code(error.httpStatus).send({ error: error.message });
    }
    const fastifyError = error as FastifyError;
    if (fastifyError.validation) {
      return reply.code(400).send({ error: describeValidation(fastifyError) });
    }
    const status = fastifyError.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status).send({ error: error.message });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ error: 'internal error' });
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: `no route for ${request.method} ${request.url.split('?')[0]}` });
  });
}

function describeValidation(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return error.message;
  const context = error.validationContext ?? 'body';
  const base = first.instancePath.split('/').filter(Boolean).join('.');
  const params = first.params as Record<string, unknown>;
  if (first.keyword === 'required')
    return `${context}.${base ? `${base}.` : ''}${String(params.missingProperty)}: is required`;
  if (first.keyword === 'additionalProperties')
    return `${context}.${base ? `${base}.` : ''}${String(params.additionalProperty)}: unknown field`;
  if (first.keyword === 'enum')
    return `${context}${base ? `.${base}` : ''}: must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
  return `${context}${base ? `.${base}` : ''}: ${first.message ?? 'is invalid'}`;
}
