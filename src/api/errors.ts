/**
 * How failures become HTTP answers: the API's own error types (401, 403, an invalid body) and the
 * one error handler that turns every error into `{ "error": … }` with the right status, so that no
 * route formats an error itself and a server fault never shows its details to the client.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { type ManifestIssue, SlessError, UnavailableError } from '../core/errors.js';
import { httpStatusOf } from './http-status.js';

/** 401: no credentials, or credentials that do not verify. Carries the RFC 7235 challenge. */
export class UnauthorizedError extends SlessError {
  readonly challenge: string;
  constructor(
    message: string,
    options: { invalidToken?: boolean; scheme?: 'bearer' | 'webhook' | 'replica' } = {},
  ) {
    super(message, { reason: 'Unauthorized', category: 'Unauthenticated' });
    // The description repeats our own message only, never anything taken from the token.
    if (options.scheme === 'webhook') this.challenge = 'HMAC realm="sless-webhooks"';
    else if (options.scheme === 'replica') this.challenge = 'HMAC realm="sless-replicas"';
    else
      this.challenge = options.invalidToken
        ? `Bearer realm="sless", error="invalid_token", error_description="${message.replace(/["\\]/g, '')}"`
        : 'Bearer realm="sless"';
  }
}

/** 403: the caller is known but may not act here (another tenant's namespace, no webhook secret). */
export class ForbiddenError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'Forbidden', category: 'Forbidden' });
  }
}

/** 503: a dependency we need to answer (e.g. the JWKS endpoint) is unreachable. */
export { UnavailableError };

/**
 * A request body that is not a valid resource. The message is `field: reason; …`, exactly the
 * words the manifest validator uses, minus the `file#index` that only makes sense for files.
 */
export class BodyValidationError extends SlessError {
  readonly issues: readonly ManifestIssue[];
  constructor(issues: readonly ManifestIssue[]) {
    super(issues.map((i) => (i.field ? `${i.field}: ${i.reason}` : `body: ${i.reason}`)).join('; '), {
      reason: 'ValidationFailed',
      category: 'Invalid',
    });
    this.issues = issues;
  }
}

/**
 * One error shape, `{ "error": "…" }`. Client mistakes map to 4xx with their message; only a genuine
 * server fault is a 500, and its details stay in the log.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | SlessError | Error, request, reply) => {
    if (error instanceof SlessError) {
      if (error instanceof UnauthorizedError) reply.header('www-authenticate', error.challenge);
      return reply.code(httpStatusOf(error)).send({ error: error.message });
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

const NAME_FIELDS = new Set(['ns', 'name', 'source']);

function describeValidation(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return error.message;
  const context = error.validationContext ?? 'body';
  const base = first.instancePath.split('/').filter(Boolean).join('.');
  const params = first.params as Record<string, unknown>;
  const field = `${context}${base ? `.${base}` : ''}`;
  if (first.keyword === 'required')
    return `${context}.${base ? `${base}.` : ''}${String(params.missingProperty)}: is required`;
  if (first.keyword === 'additionalProperties')
    return `${context}.${base ? `${base}.` : ''}${String(params.additionalProperty)}: unknown field`;
  if (first.keyword === 'enum')
    return `${field}: must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
  // Names in paths follow the manifest rule, and say so in the same words.
  if ((first.keyword === 'pattern' || first.keyword === 'maxLength') && NAME_FIELDS.has(base))
    return `${field}: must be a DNS-1123 label (lowercase letters, digits and "-", at most 63)`;
  return `${field}: ${first.message ?? 'is invalid'}`;
}
