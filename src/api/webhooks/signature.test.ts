/**
 * Webhook signature checks: fixed vectors for every scheme (hub SHA-256, Gitea, the sless header,
 * GitLab token), refusals of wrong, truncated, SHA-1-only and missing signatures, the first header found
 * deciding, and every comparison going through crypto.timingSafeEqual with equal-length buffers.
 */
import * as crypto from 'node:crypto';
import { beforeEach, describe, expect, test, vi } from 'vitest';
import { hmacSha256Hex, verifyWebhook } from './signature.js';

// The real timingSafeEqual, wrapped so the tests can see that every comparison goes through it.
vi.mock('node:crypto', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:crypto')>();
  return { ...original, timingSafeEqual: vi.fn(original.timingSafeEqual) };
});
const timingSafeEqual = vi.mocked(crypto.timingSafeEqual);
beforeEach(() => {
  timingSafeEqual.mockClear();
});

describe('webhook signatures', () => {
  test("GitHub's published example vector", () => {
    const secret = "It's a Secret to Everybody";
    const body = Buffer.from('Hello, World!');
    expect(`sha256=${hmacSha256Hex(secret, body)}`).toBe(
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
    expect(
      verifyWebhook(
        { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17' },
        body,
        secret,
      ),
    ).toEqual({ ok: true, scheme: 'hub-sha256' });
  });

  test('wrong, truncated, upper-case prefix, SHA-1 only, and missing signatures are refused', () => {
    const body = Buffer.from('{}');
    const good = hmacSha256Hex('s', body);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${good}` }, body, 's').ok).toBe(true);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${good}` }, body, 't').ok).toBe(false);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${good.slice(0, 40)}` }, body, 's').ok).toBe(false);
    expect(verifyWebhook({ 'x-hub-signature-256': good }, body, 's').ok).toBe(false);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha1=${good}` }, body, 's').ok).toBe(false);
    const sha1Only = verifyWebhook({ 'x-hub-signature': 'sha1=0123' }, body, 's');
    expect(sha1Only).toEqual({ ok: false, reason: expect.stringContaining('SHA-1') });
    expect(verifyWebhook({}, body, 's')).toEqual({ ok: false, reason: expect.stringContaining('missing') });
  });

  test('Gitea, GitLab token and the generic header', () => {
    const body = Buffer.from('payload');
    const mac = hmacSha256Hex('k', body);
    expect(verifyWebhook({ 'x-gitea-signature': mac }, body, 'k').ok).toBe(true);
    expect(verifyWebhook({ 'x-sless-signature': `sha256=${mac}` }, body, 'k').ok).toBe(true);
    expect(verifyWebhook({ 'x-gitlab-token': 'k' }, body, 'k').ok).toBe(true);
    expect(verifyWebhook({ 'x-gitlab-token': 'k2' }, body, 'k').ok).toBe(false);
    expect(verifyWebhook({ 'x-gitlab-token': '' }, body, 'k').ok).toBe(false);
  });

  test('golden signatures: fixed secret and body, fixed digest for every scheme', () => {
    const body = Buffer.from('{"ref":"refs/heads/main","after":"0123456789abcdef0123456789abcdef01234567"}');
    // Computed outside Node: printf '%s' "$body" | openssl dgst -sha256 -hmac 'sless-webhook-secret'
    const golden = '7e62791824d89e78f354789a7f0d05165e79f987b82ed8a92091d97201e332da';
    expect(hmacSha256Hex('sless-webhook-secret', body)).toBe(golden);
    const secret = 'sless-webhook-secret';
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${golden}` }, body, secret)).toEqual({
      ok: true,
      scheme: 'hub-sha256',
    });
    expect(verifyWebhook({ 'x-gitea-signature': golden }, body, secret)).toEqual({
      ok: true,
      scheme: 'gitea',
    });
    expect(verifyWebhook({ 'x-sless-signature': `sha256=${golden}` }, body, secret)).toEqual({
      ok: true,
      scheme: 'sless-sha256',
    });
    expect(verifyWebhook({ 'x-gitlab-token': secret }, body, secret)).toEqual({
      ok: true,
      scheme: 'gitlab-token',
    });
  });

  test('hex digits are compared as bytes: an upper-case digest is the same signature', () => {
    const body = Buffer.from('payload');
    const mac = hmacSha256Hex('k', body);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${mac.toUpperCase()}` }, body, 'k').ok).toBe(true);
    expect(verifyWebhook({ 'x-gitea-signature': mac.toUpperCase() }, body, 'k').ok).toBe(true);
  });

  test('every secret comparison goes through crypto.timingSafeEqual, match or not', () => {
    const body = Buffer.from('payload');
    const mac = hmacSha256Hex('k', body);
    const wrong = hmacSha256Hex('other', body);
    const cases: Array<[Record<string, string>, boolean]> = [
      [{ 'x-hub-signature-256': `sha256=${mac}` }, true],
      [{ 'x-hub-signature-256': `sha256=${wrong}` }, false],
      [{ 'x-gitea-signature': mac }, true],
      [{ 'x-gitea-signature': wrong }, false],
      [{ 'x-sless-signature': `sha256=${mac}` }, true],
      [{ 'x-sless-signature': `sha256=${wrong}` }, false],
      [{ 'x-gitlab-token': 'k' }, true],
      [{ 'x-gitlab-token': 'a-much-longer-wrong-token' }, false],
    ];
    for (const [headers, ok] of cases) {
      timingSafeEqual.mockClear();
      expect(verifyWebhook(headers, body, 'k').ok, JSON.stringify(headers)).toBe(ok);
      expect(timingSafeEqual, JSON.stringify(headers)).toHaveBeenCalledTimes(1);
      const [a, b] = timingSafeEqual.mock.calls[0] as [Buffer, Buffer];
      // Equal lengths, so the comparison itself never throws nor short-circuits on length.
      expect(a.length, JSON.stringify(headers)).toBe(32);
      expect(b.length, JSON.stringify(headers)).toBe(32);
    }
  });

  test('the first header found decides, strongest first, and an array header uses its first value', () => {
    const body = Buffer.from('x');
    const mac = hmacSha256Hex('k', body);
    // A good GitLab token does not rescue a bad hub signature.
    expect(verifyWebhook({ 'x-hub-signature-256': 'sha256=00', 'x-gitlab-token': 'k' }, body, 'k')).toEqual({
      ok: false,
      reason: 'X-Hub-Signature-256 does not match',
    });
    expect(verifyWebhook({ 'x-gitea-signature': 'nothex', 'x-gitlab-token': 'k' }, body, 'k')).toEqual({
      ok: false,
      reason: 'X-Gitea-Signature does not match',
    });
    expect(verifyWebhook({ 'x-sless-signature': mac, 'x-gitlab-token': 'k' }, body, 'k')).toEqual({
      ok: false,
      reason: 'X-Sless-Signature must be "sha256=<hex>"',
    });
    expect(verifyWebhook({ 'x-gitlab-token': 'no' }, body, 'k')).toEqual({
      ok: false,
      reason: 'X-Gitlab-Token does not match',
    });
    expect(verifyWebhook({ 'x-hub-signature-256': [`sha256=${mac}`, 'sha256=00'] }, body, 'k').ok).toBe(true);
    expect(verifyWebhook({ 'x-hub-signature-256': ['sha256=00', `sha256=${mac}`] }, body, 'k').ok).toBe(
      false,
    );
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=${mac}x` }, body, 'k').ok).toBe(false);
    expect(verifyWebhook({ 'x-hub-signature-256': `sha256=x${mac}` }, body, 'k').ok).toBe(false);
  });
});
