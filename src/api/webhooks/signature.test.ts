import { describe, expect, test } from 'vitest';
import { hmacSha256Hex, verifyWebhook } from './signature.js';

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
});
