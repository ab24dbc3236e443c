/**
 * Auth and webhook-secret settings read from the environment: JWT settings with their defaults and each
 * refusal, http JWKS on loopback only, local config refusing a non-loopback bind without auth, and
 * webhook secrets that belong to exactly one namespace and source, a global one being a config error.
 */
import { describe, expect, test } from 'vitest';
import { AuthConfigError, loadAuthSettings, loadWebhookSecrets, webhookSecretFor } from './auth.js';
import { ConfigError, loadLocalConfig } from './config.js';

const base = { SLESS_AUTH_ISSUER: 'https://issuer', SLESS_AUTH_AUDIENCE: 'sless' };

describe('auth settings', () => {
  test('off when no key is configured', () => {
    expect(loadAuthSettings({})).toBeUndefined();
  });

  test('JWKS URL with defaults', () => {
    const settings = loadAuthSettings({ ...base, SLESS_AUTH_JWKS_URL: 'https://idp.example.com/jwks' });
    expect(settings).toEqual({
      key: { kind: 'jwks', url: 'https://idp.example.com/jwks' },
      issuer: 'https://issuer',
      audience: 'sless',
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      clockToleranceSec: 30,
      adminClaim: 'sless_admin',
    });
    expect(Object.isFrozen(settings)).toBe(true);
  });

  test.each([
    [{ SLESS_AUTH_JWKS_URL: 'https://x/jwks' }, 'SLESS_AUTH_ISSUER is required'],
    [{ SLESS_AUTH_JWKS_URL: 'https://x/jwks', SLESS_AUTH_ISSUER: 'i' }, 'SLESS_AUTH_AUDIENCE is required'],
    [{ ...base }, 'no key'],
    [{ ...base, SLESS_AUTH_JWKS_URL: 'https://x', SLESS_AUTH_PUBLIC_KEY: 'k' }, 'not both'],
    [{ ...base, SLESS_AUTH_JWKS_URL: 'http://idp.example.com/jwks' }, 'must be https'],
    [{ ...base, SLESS_AUTH_JWKS_URL: 'not a url' }, 'is not a URL'],
    [
      { ...base, SLESS_AUTH_JWKS_URL: 'https://x', SLESS_AUTH_ALGORITHMS: 'RS256,HS256' },
      '"HS256" is not allowed',
    ],
    [{ ...base, SLESS_AUTH_JWKS_URL: 'https://x', SLESS_AUTH_ALGORITHMS: 'none' }, '"none" is not allowed'],
    [{ ...base, SLESS_AUTH_JWKS_URL: 'https://x', SLESS_AUTH_CLOCK_TOLERANCE_SEC: '-1' }, 'whole seconds'],
    [{ ...base, SLESS_AUTH_PUBLIC_KEY_FILE: '/nonexistent/key.pem' }, 'cannot read'],
  ])('refuses %j', (env, message) => {
    expect(() => loadAuthSettings(env)).toThrow(AuthConfigError);
    expect(() => loadAuthSettings(env)).toThrow(message);
  });

  test('http JWKS is allowed on loopback only; custom algorithms, tolerance and admin claim', () => {
    const settings = loadAuthSettings({
      ...base,
      SLESS_AUTH_JWKS_URL: 'http://127.0.0.1:9999/jwks',
      SLESS_AUTH_ALGORITHMS: 'ES256, EdDSA',
      SLESS_AUTH_CLOCK_TOLERANCE_SEC: '0',
      SLESS_AUTH_ADMIN_CLAIM: 'is_admin',
    });
    expect(settings?.algorithms).toEqual(['ES256', 'EdDSA']);
    expect(settings?.clockToleranceSec).toBe(0);
    expect(settings?.adminClaim).toBe('is_admin');
  });
});

describe('local config', () => {
  test('auth off on loopback; refused on other addresses', () => {
    expect(loadLocalConfig({}, {}).authDisabled).toBe(true);
    expect(() => loadLocalConfig({ host: '0.0.0.0' }, {})).toThrow(ConfigError);
  });

  test('auth on: may bind anywhere', () => {
    const config = loadLocalConfig(
      { host: '0.0.0.0' },
      { ...base, SLESS_AUTH_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----\n...' },
    );
    expect(config.authDisabled).toBe(false);
    expect(config.auth?.key.kind).toBe('publicKey');
  });

  test('an auth mistake is a ConfigError', () => {
    expect(() => loadLocalConfig({}, { SLESS_AUTH_JWKS_URL: 'https://x' })).toThrow(ConfigError);
  });
});

describe('webhook secrets', () => {
  test('one namespace and one source per secret; nothing else signs', () => {
    const settings = loadWebhookSecrets({
      SLESS_WEBHOOK_SECRET_TEAM_A__MY_REPO: 'mine',
      SLESS_WEBHOOK_SECRET_DEFAULT__EMPTY: '',
    });
    expect(webhookSecretFor(settings, 'team-a', 'my-repo')).toBe('mine');
    // The same source name in another namespace has no secret, so its webhooks are refused.
    expect(webhookSecretFor(settings, 'team-b', 'my-repo')).toBeUndefined();
    expect(webhookSecretFor(settings, 'team', 'a-my-repo')).toBeUndefined();
    expect(webhookSecretFor(settings, 'default', 'empty')).toBeUndefined();
    // `--` would make the separator ambiguous, so such names have no env form at all.
    expect(webhookSecretFor(settings, 'team--a', 'my-repo')).toBeUndefined();
  });

  test('a global secret, or one without a namespace, is a config error that says what to set', () => {
    expect(() => loadWebhookSecrets({ SLESS_WEBHOOK_SECRET: 'global' })).toThrow(
      /SLESS_WEBHOOK_SECRET_<NAMESPACE>__<SOURCE>/,
    );
    expect(() => loadWebhookSecrets({ SLESS_WEBHOOK_SECRET_SHOP: 'x' })).toThrow(
      /SLESS_WEBHOOK_SECRET_SHOP: a webhook secret belongs to one namespace and source/,
    );
  });
});
