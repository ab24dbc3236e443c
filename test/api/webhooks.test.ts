/**
 * POST /v1/webhooks over real HTTP to the real API app: signed pushes from GitHub, Gitea, GitLab and the
 * generic header start exactly one sync per delivery, pings, other branches and tags are ignored with a
 * reason, and bad, missing, SHA-1-only or unconfigured (also empty) secrets are refused with no sync,
 * which a signed barrier request for another source makes observable.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { gitSource, type Harness, startHarness } from './harness.js';

const SECRET = 'webhook-secret-for-tests';
const BARRIER_SECRET = 'barrier-secret';
let h: Harness;
let base: string;

const sign = (body: string, secret = SECRET) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

function push(ref: string) {
  return JSON.stringify({ ref, after: 'b'.repeat(40), repository: { full_name: 'o/r' } });
}

async function post(path: string, body: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/**
 * The positive signal before "no sync happened": a signed push for another source, sent after the
 * requests under test, and its sync observed. Syncs start in request order, so once the barrier's has
 * been seen, any sync an earlier request would have started has been recorded too. The barrier's own
 * sync is then taken out of the record.
 */
async function settle(): Promise<void> {
  const body = push('refs/heads/main');
  const response = await post('/v1/webhooks/default/barrier', body, {
    'x-github-event': 'push',
    'x-hub-signature-256': sign(body, BARRIER_SECRET),
  });
  expect(response.status).toBe(202);
  // Checked and re-armed synchronously, so no sync can slip between the check and the wait.
  while (!h.syncCalls.some((c) => c.name === 'barrier')) await h.nextSync();
  h.syncCalls.splice(
    h.syncCalls.findIndex((c) => c.name === 'barrier'),
    1,
  );
}

beforeAll(async () => {
  h = await startHarness({
    secrets: {
      'default/repo': SECRET,
      'default/lab': 'gitlab-token',
      'default/barrier': BARRIER_SECRET,
      // As a kube Secret whose webhookSecret is the empty string gives it.
      'default/empty': '',
    },
  });
  await h.store.apply(gitSource('default', 'barrier', 'main'));
  await h.store.apply(gitSource('default', 'repo', 'main'));
  await h.store.apply(gitSource('default', 'lab', 'main'));
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => h.close());
beforeEach(() => {
  h.syncCalls.length = 0;
});

describe('POST /v1/webhooks/{ns}/{source} over real HTTP', () => {
  test('GitHub push to the branch: 202 and a sync; the same delivery again: no second sync', async () => {
    const body = push('refs/heads/main');
    const delivery = randomUUID();
    const headers = {
      'x-github-event': 'push',
      'x-github-delivery': delivery,
      'x-hub-signature-256': sign(body),
    };
    const synced = h.nextSync();
    const first = await post('/v1/webhooks/default/repo', body, headers);
    expect(first.status).toBe(202);
    expect(await first.json()).toEqual({ status: 'accepted', source: 'default/repo' });
    expect(await synced).toEqual({ namespace: 'default', name: 'repo' });

    const again = await post('/v1/webhooks/default/repo', body, headers);
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual({
      status: 'ignored',
      reason: expect.stringContaining('already handled'),
    });
    await settle();
    expect(h.syncCalls).toHaveLength(1);
  });

  test('redeliveries of Gitea, GitLab and generic deliveries sync once; ids are per source', async () => {
    const body = push('refs/heads/main');
    const senders: Array<[string, () => Record<string, string>]> = [
      [
        'repo',
        () => ({ 'x-gitea-event': 'push', 'x-gitea-delivery': 'gitea-1', 'x-hub-signature-256': sign(body) }),
      ],
      [
        'lab',
        () => ({
          'x-gitlab-event': 'Push Hook',
          'x-gitlab-event-uuid': 'lab-1',
          'x-gitlab-token': 'gitlab-token',
        }),
      ],
      ['repo', () => ({ 'x-sless-delivery': 'generic-1', 'x-sless-signature': sign(body) })],
    ];
    for (const [source, headers] of senders) {
      const first = await post(`/v1/webhooks/default/${source}`, body, headers());
      expect(await first.json(), source).toEqual({ status: 'accepted', source: `default/${source}` });
      const again = await post(`/v1/webhooks/default/${source}`, body, headers());
      expect(await again.json(), source).toEqual({
        status: 'ignored',
        reason: expect.stringContaining('already handled'),
      });
    }
    // The same id for another source is another delivery.
    const other = await post('/v1/webhooks/default/lab', body, {
      'x-sless-delivery': 'generic-1',
      'x-gitlab-token': 'gitlab-token',
    });
    expect(await other.json()).toEqual({ status: 'accepted', source: 'default/lab' });
    await settle();
    expect(h.syncCalls.map((c) => c.name)).toEqual(['repo', 'lab', 'repo', 'lab']);
  });

  test('Gitea push (X-Gitea-Event, X-Hub-Signature-256) and GitLab (X-Gitlab-Token) sync', async () => {
    const body = push('refs/heads/main');
    const gitea = await post('/v1/webhooks/default/repo', body, {
      'x-gitea-event': 'push',
      'x-github-event': 'push',
      'x-gitea-delivery': randomUUID(),
      'x-hub-signature-256': sign(body),
    });
    expect(gitea.status).toBe(202);
    const lab = await post('/v1/webhooks/default/lab', body, {
      'x-gitlab-event': 'Push Hook',
      'x-gitlab-event-uuid': randomUUID(),
      'x-gitlab-token': 'gitlab-token',
    });
    expect(lab.status).toBe(202);
    expect(await lab.json()).toEqual({ status: 'accepted', source: 'default/lab' });
    await settle();
    expect(h.syncCalls.map((c) => c.name).sort()).toEqual(['lab', 'repo']);
  });

  test('generic X-Sless-Signature and GitHub form encoding', async () => {
    const body = '{}';
    const generic = await post('/v1/webhooks/default/repo', body, { 'x-sless-signature': sign(body) });
    expect(generic.status).toBe(202);
    const form = `payload=${encodeURIComponent(push('refs/heads/main'))}`;
    const github = await fetch(`${base}/v1/webhooks/default/repo`, {
      method: 'POST',
      body: form,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-github-event': 'push',
        'x-hub-signature-256': sign(form),
      },
    });
    expect(github.status).toBe(202);
    expect(await github.json()).toEqual({ status: 'accepted', source: 'default/repo' });
    await settle();
    expect(h.syncCalls).toHaveLength(2);
  });

  test('ping, another branch, tags and a GitLab tag push are ignored with a reason', async () => {
    const cases: Array<[string, Record<string, string>]> = [
      [JSON.stringify({ zen: 'hi', hook_id: 1 }), { 'x-github-event': 'ping' }],
      [push('refs/heads/feature'), { 'x-github-event': 'push' }],
      [push('refs/tags/v1.0.0'), { 'x-github-event': 'push' }],
      [push('refs/heads/main'), { 'x-github-event': 'pull_request' }],
    ];
    for (const [body, headers] of cases) {
      const response = await post('/v1/webhooks/default/repo', body, {
        ...headers,
        'x-hub-signature-256': sign(body),
      });
      expect(response.status).toBe(202);
      const answer = (await response.json()) as { status: string; reason: string };
      expect(answer.status).toBe('ignored');
      expect(answer.reason.length).toBeGreaterThan(0);
    }
    const tag = push('refs/tags/v1');
    const lab = await post('/v1/webhooks/default/lab', tag, {
      'x-gitlab-event': 'Tag Push Hook',
      'x-gitlab-token': 'gitlab-token',
    });
    expect(((await lab.json()) as { status: string }).status).toBe('ignored');
    await settle();
    expect(h.syncCalls).toEqual([]);
  });

  test('bad, missing and SHA-1-only signatures: 401 and no sync', async () => {
    const body = push('refs/heads/main');
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'x-hub-signature-256': sign(body, 'wrong') }, 'does not match'],
      [{ 'x-hub-signature-256': sign(`${body} `) }, 'does not match'],
      [{ 'x-hub-signature-256': 'sha256=zz' }, 'does not match'],
      [{ 'x-hub-signature': `sha1=${createHmac('sha1', SECRET).update(body).digest('hex')}` }, 'SHA-1'],
      [{}, 'missing signature'],
      [{ 'x-gitlab-token': 'guess' }, 'X-Gitlab-Token does not match'],
      [{ 'x-sless-signature': sign(body, 'wrong') }, 'does not match'],
    ];
    for (const [headers, message] of cases) {
      const response = await post('/v1/webhooks/default/repo', body, {
        'x-github-event': 'push',
        ...headers,
      });
      expect(response.status, message).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('HMAC realm="sless-webhooks"');
      expect(await response.json()).toEqual({ error: expect.stringContaining(message) });
    }
    await settle();
    expect(h.syncCalls).toEqual([]);
  });

  test('no secret configured: refused (403), even for a correctly "signed" request', async () => {
    await h.store.apply(gitSource('default', 'nosecret'));
    const body = push('refs/heads/main');
    const response = await post('/v1/webhooks/default/nosecret', body, {
      'x-github-event': 'push',
      'x-hub-signature-256': sign(body, ''),
    });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ error: expect.stringContaining('no secret') });
    await settle();
    expect(h.syncCalls).toEqual([]);
  });

  test('an empty secret is no secret: refused (403), though HMAC under the empty key is easy to forge', async () => {
    await h.store.apply(gitSource('default', 'empty'));
    const body = push('refs/heads/main');
    const response = await post('/v1/webhooks/default/empty', body, {
      'x-github-event': 'push',
      'x-hub-signature-256': sign(body, ''),
    });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({
      error: 'webhooks are not configured for source default/empty (no secret)',
    });
    await settle();
    expect(h.syncCalls).toEqual([]);
  });

  test('unknown source 404 (after the signature), bad names 400, oversized 413, bad JSON 400', async () => {
    const body = push('refs/heads/main');
    const secretOnly = await startHarness({ secrets: { 'default/ghost': SECRET }, bodyLimit: 1024 });
    try {
      const ghost = await secretOnly.app.inject({
        method: 'POST',
        url: '/v1/webhooks/default/ghost',
        payload: body,
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-hub-signature-256': sign(body),
        },
      });
      expect(ghost.statusCode).toBe(404);
      const big = 'x'.repeat(2048);
      const tooBig = await secretOnly.app.inject({
        method: 'POST',
        url: '/v1/webhooks/default/ghost',
        payload: big,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(big) },
      });
      expect(tooBig.statusCode).toBe(413);
      expect(tooBig.json()).toEqual({ error: expect.any(String) });
    } finally {
      await secretOnly.close();
    }
    const badName = await post('/v1/webhooks/default/Bad_Name', body, { 'x-hub-signature-256': sign(body) });
    expect(badName.status).toBe(400);
    const notJson = '{"ref": ';
    const broken = await post('/v1/webhooks/default/repo', notJson, {
      'x-github-event': 'push',
      'x-hub-signature-256': sign(notJson),
    });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toEqual({ error: 'body: is not valid JSON' });
    const huge = 'y'.repeat(1024 * 1024 + 10);
    const over = await post('/v1/webhooks/default/repo', huge, { 'x-hub-signature-256': sign(huge) });
    expect(over.status).toBe(413);
    await settle();
    expect(h.syncCalls).toEqual([]);
  });
});
