/**
 * Webhook authentication by shared secret. Every comparison is constant time over equal-length
 * digests, so neither timing nor length leaks anything about the secret.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export type SignatureScheme = 'hub-sha256' | 'gitea' | 'gitlab-token' | 'sless-sha256';

export type Verification = { ok: true; scheme: SignatureScheme } | { ok: false; reason: string };

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function hmacSha256Hex(secret: string, body: Uint8Array): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

function equalHmac(secret: string, body: Uint8Array, providedHex: string): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(providedHex)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(providedHex, 'hex'));
}

/** Tokens differ in length; hashing both first gives equal-length buffers to compare. */
function equalToken(secret: string, provided: string): boolean {
  const a = createHash('sha256').update(secret).digest();
  const b = createHash('sha256').update(provided).digest();
  return timingSafeEqual(a, b);
}

/**
 * Checks the strongest signature the request carries:
 * - `X-Hub-Signature-256: sha256=<hex>` (GitHub, Gitea), `X-Gitea-Signature: <hex>` (older Gitea);
 * - `X-Sless-Signature: sha256=<hex>` (any other sender);
 * - `X-Gitlab-Token: <secret>` (GitLab sends the secret itself).
 * A SHA-1 `X-Hub-Signature` alone is refused: SHA-1 HMACs are no longer an acceptable choice.
 */
export function verifyWebhook(headers: Headers, body: Uint8Array, secret: string): Verification {
  const hub = header(headers, 'x-hub-signature-256');
  if (hub !== undefined) return prefixed(hub, 'X-Hub-Signature-256', 'hub-sha256', secret, body);
  const gitea = header(headers, 'x-gitea-signature');
  if (gitea !== undefined)
    return equalHmac(secret, body, gitea)
      ? { ok: true, scheme: 'gitea' }
      : { ok: false, reason: 'X-Gitea-Signature does not match' };
  const sless = header(headers, 'x-sless-signature');
  if (sless !== undefined) return prefixed(sless, 'X-Sless-Signature', 'sless-sha256', secret, body);
  const gitlab = header(headers, 'x-gitlab-token');
  if (gitlab !== undefined)
    return equalToken(secret, gitlab)
      ? { ok: true, scheme: 'gitlab-token' }
      : { ok: false, reason: 'X-Gitlab-Token does not match' };
  if (header(headers, 'x-hub-signature') !== undefined)
    return {
      ok: false,
      reason: 'SHA-1 signatures (X-Hub-Signature) are not accepted; send X-Hub-Signature-256',
    };
  return {
    ok: false,
    reason: 'missing signature: send X-Hub-Signature-256, X-Gitlab-Token or X-Sless-Signature',
  };
}

function prefixed(
  value: string,
  name: string,
  scheme: SignatureScheme,
  secret: string,
  body: Uint8Array,
): Verification {
  if (!value.startsWith('sha256=')) return { ok: false, reason: `${name} must be "sha256=<hex>"` };
  return equalHmac(secret, body, value.slice('sha256='.length))
    ? { ok: true, scheme }
    : { ok: false, reason: `${name} does not match` };
}
