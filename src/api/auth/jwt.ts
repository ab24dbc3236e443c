/**
 * Bearer JWTs verified with jose: signature (JWKS URL or one public key), issuer, audience, an
 * algorithm allow-list and a clock tolerance. Tokens are never logged or echoed back.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import {
  createRemoteJWKSet,
  type JWTPayload,
  type JWTVerifyGetKey,
  errors as joseErrors,
  jwtVerify,
} from 'jose';
import type { AuthSettings } from '../../config/auth.js';
import { tenantNamespace } from '../../core/naming.js';
import { UnauthorizedError, UnavailableError } from '../errors.js';
import type { Authenticator, Principal } from './authenticator.js';

/** Real tokens are a few KB; anything far larger is not worth parsing. */
const MAX_TOKEN_LENGTH = 16 * 1024;

export interface JwtAuthenticatorOptions {
  readonly key: KeyObject | JWTVerifyGetKey;
  readonly issuer: string;
  readonly audience: string;
  readonly algorithms: readonly string[];
  readonly clockToleranceSec: number;
  readonly adminClaim: string;
  readonly description: string;
}

export class JwtAuthenticator implements Authenticator {
  private readonly options: JwtAuthenticatorOptions;
  readonly description: string;

  constructor(options: JwtAuthenticatorOptions) {
    this.options = options;
    this.description = options.description;
  }

  async authenticate(request: FastifyRequest): Promise<Principal> {
    const token = bearerToken(request.headers.authorization);
    const payload = await this.verify(token);
    const subject = payload.sub;
    if (typeof subject !== 'string' || subject === '')
      throw new UnauthorizedError('token has no subject', { invalidToken: true });
    return {
      subject,
      namespace: tenantNamespace(subject),
      admin: payload[this.options.adminClaim] === true,
    };
  }

  private async verify(token: string): Promise<JWTPayload> {
    try {
      const verifyOptions = {
        issuer: this.options.issuer,
        audience: this.options.audience,
        algorithms: [...this.options.algorithms],
        clockTolerance: this.options.clockToleranceSec,
        requiredClaims: ['sub', 'exp'],
      };
      // Two calls rather than a union, so each matches one of jose's overloads.
      const result =
        // Stryker disable next-line ConditionalExpression,EqualityOperator,StringLiteral: equivalent, both branches make the same call
        typeof this.options.key === 'function'
          ? await jwtVerify(token, this.options.key, verifyOptions)
          : await jwtVerify(token, this.options.key, verifyOptions);
      return result.payload;
    } catch (error) {
      throw translate(error);
    }
  }
}

function bearerToken(header: string | undefined): string {
  if (header === undefined || header === '') throw new UnauthorizedError('missing bearer token');
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header);
  if (!match?.[1]) throw new UnauthorizedError('authorization header must be "Bearer <token>"');
  if (match[1].length > MAX_TOKEN_LENGTH)
    throw new UnauthorizedError('token too large', { invalidToken: true });
  return match[1];
}

/** jose's errors become 401s with short, token-free messages; unreachable keys become 503. */
function translate(error: unknown): Error {
  const invalid = (message: string) => new UnauthorizedError(message, { invalidToken: true });
  if (error instanceof joseErrors.JWTExpired) return invalid('token expired');
  if (error instanceof joseErrors.JWTClaimValidationFailed)
    return invalid(
      `token claim "${error.claim}" ${error.reason === 'missing' ? 'is missing' : 'check failed'}`,
    );
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return invalid('token algorithm not allowed');
  if (error instanceof joseErrors.JWSSignatureVerificationFailed)
    return invalid('token signature is invalid');
  if (error instanceof joseErrors.JWKSNoMatchingKey) return invalid('no key matches the token');
  if (error instanceof joseErrors.JWKSMultipleMatchingKeys) return invalid('several keys match the token');
  if (error instanceof joseErrors.JWKSTimeout) return new UnavailableError('signing keys are unreachable');
  if (error instanceof joseErrors.JWKSInvalid) return new UnavailableError('signing keys are invalid');
  if (error instanceof joseErrors.JOSENotSupported) return invalid('token algorithm not supported');
  if (error instanceof joseErrors.JWTInvalid || error instanceof joseErrors.JWSInvalid)
    return invalid('malformed token');
  // A JOSEError we did not list is still about the token (e.g. a key of the wrong type).
  if (error instanceof joseErrors.JOSEError && error.code !== 'ERR_JOSE_GENERIC')
    return invalid('invalid token');
  // Anything else (fetch failed, non-200 JWKS response) is our side, not the caller's.
  return new UnavailableError('signing keys are unreachable');
}

/** Parses a PEM (SPKI) or JWK (JSON) public key. Throws at startup, not at the first request. */
export function parsePublicKey(text: string): KeyObject {
  if (text.includes('PRIVATE KEY'))
    throw new Error('SLESS_AUTH_PUBLIC_KEY must be a public key, not a private one');
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) return createPublicKey(trimmed);
  const jwk = JSON.parse(trimmed) as import('node:crypto').JsonWebKey;
  // createPublicKey quietly derives the public half of a private JWK (it has `d`); refuse it instead,
  // as for PEM, so a private key never sits in the controller's configuration.
  if (jwk.d !== undefined) throw new Error('SLESS_AUTH_PUBLIC_KEY must be a public key, not a private one');
  return createPublicKey({ key: jwk, format: 'jwk' });
}

/** How long one JWKS fetch may take, and how long after a failed one requests fail fast. */
export const JWKS_TIMEOUT_MS = 2000;
export const JWKS_FAILURE_COOLDOWN_MS = 10_000;

/**
 * jose's remote key set, plus a cool-down after a failed fetch: a JWKS endpoint that hangs would
 * otherwise hold every request for the whole timeout, one after another. For the cool-down, requests
 * answer 503 at once; the next request after it tries the endpoint again.
 */
export function jwksWithCooldown(
  url: URL,
  options: { timeoutMs?: number; cooldownMs?: number; now?: () => number } = {},
): JWTVerifyGetKey {
  const timeoutMs = options.timeoutMs ?? JWKS_TIMEOUT_MS;
  const cooldownMs = options.cooldownMs ?? JWKS_FAILURE_COOLDOWN_MS;
  const now = options.now ?? Date.now;
  const remote = createRemoteJWKSet(url, { timeoutDuration: timeoutMs, cooldownDuration: 30_000 });
  let failedAt: number | undefined;
  return async (header, token) => {
    // Stryker disable next-line ConditionalExpression: equivalent, with failedAt undefined the difference is NaN and NaN < cooldownMs is false
    if (failedAt !== undefined && now() - failedAt < cooldownMs)
      throw new joseErrors.JWKSTimeout('signing keys were unreachable moments ago');
    try {
      const key = await remote(header, token);
      failedAt = undefined;
      return key;
    } catch (error) {
      // Only the endpoint failing starts the cool-down; a token naming an unknown key does not.
      const aboutToken =
        error instanceof joseErrors.JWKSNoMatchingKey ||
        error instanceof joseErrors.JWKSMultipleMatchingKeys ||
        error instanceof joseErrors.JOSEAlgNotAllowed ||
        error instanceof joseErrors.JOSENotSupported;
      if (!aboutToken) failedAt = now();
      throw error;
    }
  };
}

export function createJwtAuthenticator(settings: AuthSettings): JwtAuthenticator {
  const key =
    settings.key.kind === 'jwks'
      ? jwksWithCooldown(new URL(settings.key.url))
      : parsePublicKey(settings.key.key);
  return new JwtAuthenticator({
    key,
    issuer: settings.issuer,
    audience: settings.audience,
    algorithms: settings.algorithms,
    clockToleranceSec: settings.clockToleranceSec,
    adminClaim: settings.adminClaim,
    description: `JWT (${settings.key.kind === 'jwks' ? `JWKS ${settings.key.url}` : 'public key'}, issuer ${
      settings.issuer
    }, audience ${settings.audience}, algorithms ${settings.algorithms.join(',')})`,
  });
}
