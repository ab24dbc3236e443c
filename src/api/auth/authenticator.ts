/**
 * What the API means by an authenticated caller: a Principal (its subject, the one namespace it may
 * act in, admin or not) and the Authenticator contract that produces one, so that no route knows
 * whether a JWT or loopback trust vouched for the caller. Local loopback mode's no-auth strategy
 * lives here too.
 */
import type { FastifyRequest } from 'fastify';

/** Who is calling, as far as authorization cares. */
export interface Principal {
  /** The token's `sub`, or `local` when auth is off. */
  readonly subject: string;
  /** The one namespace a tenant may act in: `sless-` + hex(sha256(sub))[0:16]. */
  readonly namespace: string;
  /** Admins act in every namespace. */
  readonly admin: boolean;
}

/**
 * Auth as a strategy (Backstage's shape): the API asks for a Principal and does not care how it was
 * established. Rejects with UnauthorizedError (401) or UnavailableError (503, keys unreachable).
 */
export interface Authenticator {
  /** For the startup log: what protects `/v1`. */
  readonly description: string;
  /**
   * True when anyone who can connect is trusted (no auth, loopback only): the API then also refuses
   * non-loopback Host values and cross-site browser requests, which loopback alone does not stop.
   */
  readonly trustsLoopback?: boolean;
  authenticate(request: FastifyRequest): Promise<Principal>;
}

/**
 * Local mode on loopback without auth: everyone is an admin. Config refuses this anywhere but
 * loopback, and startup says so loudly.
 */
export class NoAuthAuthenticator implements Authenticator {
  readonly description = 'none (local loopback mode: every caller is an admin)';
  readonly trustsLoopback = true;
  private static readonly principal: Principal = Object.freeze({
    subject: 'local',
    namespace: 'default',
    admin: true,
  });

  async authenticate(): Promise<Principal> {
    return NoAuthAuthenticator.principal;
  }
}
