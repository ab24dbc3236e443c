/**
 * Authentication and webhook settings from the environment, validated once at startup. The API's
 * auth plugin gets these values; it never reads the environment itself.
 */
import { readFileSync } from 'node:fs';
import { scopedEnvSuffix } from '../core/naming.js';

/** Asymmetric algorithms only: a public key or JWKS can never verify an HMAC (alg confusion). */
export const SUPPORTED_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;
export const DEFAULT_ALGORITHMS: readonly string[] = ['RS256', 'ES256', 'EdDSA'];

export type AuthKeySource =
  | { readonly kind: 'jwks'; readonly url: string }
  /** PEM (SPKI) text or a JWK as JSON text. */
  | { readonly kind: 'publicKey'; readonly key: string };

export interface AuthSettings {
  readonly key: AuthKeySource;
  readonly issuer: string;
  readonly audience: string;
  readonly algorithms: readonly string[];
  readonly clockToleranceSec: number;
  /** A claim that, when exactly `true`, lets the caller act in every namespace. */
  readonly adminClaim: string;
}

export interface WebhookSecretSettings {
  /**
   * SLESS_WEBHOOK_SECRET_<NS>__<SOURCE>, keyed by that suffix: a secret signs for one source of one
   * namespace only, never for a source of the same name elsewhere.
   */
  readonly perSource: Readonly<Record<string, string>>;
}

export class AuthConfigError extends Error {}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

/**
 * Reads SLESS_AUTH_*. Returns undefined when no key is configured (auth off; the caller decides
 * whether that is allowed). A key without issuer and audience is refused: checking only the
 * signature would accept any token the identity provider ever issued for any application.
 */
export function loadAuthSettings(env: NodeJS.ProcessEnv): AuthSettings | undefined {
  const jwksUrl = nonEmpty(env.SLESS_AUTH_JWKS_URL);
  const keyFile = nonEmpty(env.SLESS_AUTH_PUBLIC_KEY_FILE);
  let publicKey = nonEmpty(env.SLESS_AUTH_PUBLIC_KEY);
  if (keyFile !== undefined) {
    if (publicKey !== undefined)
      throw new AuthConfigError('set SLESS_AUTH_PUBLIC_KEY or SLESS_AUTH_PUBLIC_KEY_FILE, not both');
    try {
      publicKey = readFileSync(keyFile, 'utf8').trim();
    } catch (error) {
      throw new AuthConfigError(
        `SLESS_AUTH_PUBLIC_KEY_FILE: cannot read ${keyFile}: ${(error as Error).message}`,
      );
    }
  }
  const issuer = nonEmpty(env.SLESS_AUTH_ISSUER);
  const audience = nonEmpty(env.SLESS_AUTH_AUDIENCE);
  if (jwksUrl === undefined && publicKey === undefined) {
    if (issuer !== undefined || audience !== undefined)
      throw new AuthConfigError(
        'SLESS_AUTH_ISSUER/SLESS_AUTH_AUDIENCE are set but no key: set SLESS_AUTH_JWKS_URL or SLESS_AUTH_PUBLIC_KEY',
      );
    return undefined;
  }
  if (jwksUrl !== undefined && publicKey !== undefined)
    throw new AuthConfigError('set SLESS_AUTH_JWKS_URL or SLESS_AUTH_PUBLIC_KEY, not both');
  if (issuer === undefined) throw new AuthConfigError('SLESS_AUTH_ISSUER is required when auth is on');
  if (audience === undefined) throw new AuthConfigError('SLESS_AUTH_AUDIENCE is required when auth is on');

  const key: AuthKeySource =
    jwksUrl !== undefined
      ? { kind: 'jwks', url: checkJwksUrl(jwksUrl) }
      : { kind: 'publicKey', key: publicKey as string };

  const algorithms = (nonEmpty(env.SLESS_AUTH_ALGORITHMS)?.split(',') ?? [...DEFAULT_ALGORITHMS])
    .map((a) => a.trim())
    .filter(Boolean);
  for (const alg of algorithms)
    if (!(SUPPORTED_ALGORITHMS as readonly string[]).includes(alg))
      throw new AuthConfigError(
        `SLESS_AUTH_ALGORITHMS: "${alg}" is not allowed (use: ${SUPPORTED_ALGORITHMS.join(', ')})`,
      );
  if (algorithms.length === 0) throw new AuthConfigError('SLESS_AUTH_ALGORITHMS: empty');

  const toleranceText = nonEmpty(env.SLESS_AUTH_CLOCK_TOLERANCE_SEC) ?? '30';
  const clockToleranceSec = Number(toleranceText);
  if (!Number.isInteger(clockToleranceSec) || clockToleranceSec < 0 || clockToleranceSec > 300)
    throw new AuthConfigError(
      `SLESS_AUTH_CLOCK_TOLERANCE_SEC: "${toleranceText}" must be whole seconds between 0 and 300`,
    );
  const adminClaim = nonEmpty(env.SLESS_AUTH_ADMIN_CLAIM) ?? 'sless_admin';

  return Object.freeze({
    key: Object.freeze(key),
    issuer,
    audience,
    algorithms: Object.freeze(algorithms),
    clockToleranceSec,
    adminClaim,
  });
}

/** Keys fetched over plain HTTP could be swapped in transit; only loopback may use http. */
function checkJwksUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new AuthConfigError(`SLESS_AUTH_JWKS_URL: "${text}" is not a URL`);
  }
  if (url.protocol === 'https:') return url.toString();
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return url.toString();
  throw new AuthConfigError(
    `SLESS_AUTH_JWKS_URL: must be https (http only for loopback), got ${url.protocol}`,
  );
}

const WEBHOOK_PREFIX = 'SLESS_WEBHOOK_SECRET';

export function loadWebhookSecrets(env: NodeJS.ProcessEnv): WebhookSecretSettings {
  const prefix = `${WEBHOOK_PREFIX}_`;
  const perSource: Record<string, string> = {};
  if (nonEmpty(env[WEBHOOK_PREFIX]) !== undefined)
    throw new AuthConfigError(
      `${WEBHOOK_PREFIX}: one secret for every source would sign for any namespace; ` +
        `set ${WEBHOOK_PREFIX}_<NAMESPACE>__<SOURCE> per source instead`,
    );
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(prefix) || value === undefined || value === '') continue;
    const suffix = name.slice(prefix.length);
    if (!suffix.includes('__'))
      throw new AuthConfigError(
        `${name}: a webhook secret belongs to one namespace and source; name it ${WEBHOOK_PREFIX}_<NAMESPACE>__<SOURCE>`,
      );
    perSource[suffix] = value;
  }
  return Object.freeze({ perSource: Object.freeze(perSource) });
}

/** The local lookup: this namespace's source's own secret, or none (its webhooks are refused). */
export function webhookSecretFor(
  settings: WebhookSecretSettings,
  namespace: string,
  sourceName: string,
): string | undefined {
  const suffix = scopedEnvSuffix(namespace, sourceName);
  return suffix === undefined ? undefined : settings.perSource[suffix];
}
