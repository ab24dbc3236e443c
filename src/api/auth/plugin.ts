/**
 * Enforces who may call a `/v1` route and in which namespace: each request gets the authenticator's
 * Principal, and a tenant is kept to its own namespace. It is applied to the route group as a
 * whole, so no single route can forget the check.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ForbiddenError } from '../errors.js';
import type { Authenticator, Principal } from './authenticator.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by requireAuth for every /v1 route it guards. */
    principal?: Principal;
  }
}

/**
 * Adds authentication and tenant authorization to every route of the context it is called in. It
 * runs in onRequest, so an unauthenticated request is refused before its body is even read.
 * Routes with a `:ns` parameter are limited to the caller's own namespace unless it is an admin.
 */
export function requireAuth(app: FastifyInstance, authenticator: Authenticator): void {
  // Stryker disable next-line StringLiteral: equivalent, the decoration only pre-shapes requests for V8
  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const principal = await authenticator.authenticate(request);
    request.principal = principal;
    // Stryker disable next-line OptionalChaining: equivalent, fastify gives every request a params object
    const ns = (request.params as { ns?: unknown } | undefined)?.ns;
    if (typeof ns === 'string' && !principal.admin && principal.namespace !== ns)
      throw new ForbiddenError(`namespace ${ns} is not yours (yours is ${principal.namespace})`);
  });
}
