/**
 * Properties: whatever arrives (bodies, headers, webhook payloads), the API answers with a status
 * below 500 and, for errors, a JSON `{error}` with a non-empty message. `app.inject` keeps it cheap.
 */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { fn, gitSource, type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ secrets: { 'default/repo': 'secret' } });
});
// Before each property, not once: "paths and methods" may draw DELETE /v1/namespaces/default/sources/repo
// (about one run in 7,000), and the webhook property must then still find its source.
beforeEach(async () => {
  await h.store.apply(fn('default', 'hello'));
  await h.store.apply(gitSource('default', 'repo'));
});
afterAll(() => h.close());

const RUNS = 150;

function expectClean(response: { statusCode: number; body: string; headers: Record<string, unknown> }): void {
  expect(response.statusCode).toBeLessThan(500);
  if (response.statusCode >= 400) {
    const parsed = JSON.parse(response.body) as { error?: unknown };
    expect(Object.keys(parsed)).toEqual(['error']);
    expect(typeof parsed.error).toBe('string');
    expect((parsed.error as string).length).toBeGreaterThan(0);
  }
}

/** Bodies that look somewhat like resources, so validation goes deep, plus arbitrary JSON. */
const specLike = fc.dictionary(
  fc.oneof(
    fc.string(),
    fc.constantFrom(
      'runtime',
      'entrypoint',
      'memoryMb',
      'type',
      'function',
      'schedule',
      'url',
      'path',
      'branch',
      'interval',
      'env',
      'runId',
      'event',
      'enabled',
      'suspend',
      'secretRef',
      'source',
    ),
  ),
  fc.oneof(
    fc.jsonValue(),
    fc.integer(),
    fc.constantFrom('nodejs20', 'hello', '../x', 'https://a/b', '* * * * *', 'cron', 'http'),
  ),
);
const bodyArb = fc.oneof(
  fc.jsonValue(),
  fc.record(
    { name: fc.oneof(fc.string(), fc.constantFrom('ok-name', 'x')), spec: specLike },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      apiVersion: fc.constantFrom('sless.dev/v1alpha1', 'v1', ''),
      kind: fc.constantFrom('GitSource', 'Function', 'Trigger', 'FunctionJob', 'Pod'),
      metadata: fc.record(
        { name: fc.string(), namespace: fc.string(), labels: fc.jsonValue() },
        { requiredKeys: [] },
      ),
      spec: specLike,
      status: fc.jsonValue(),
    },
    { requiredKeys: [] },
  ),
);

const postUrls = fc.constantFrom(
  '/v1/namespaces/default/sources',
  '/v1/namespaces/default/triggers',
  '/v1/namespaces/default/jobs',
  '/v1/namespaces/default/validate',
  '/v1/namespaces/default/ensure',
  '/v1/namespaces/default/sources/repo/sync',
);

describe('no input breaks the API', () => {
  test('JSON bodies of any shape', async () => {
    await fc.assert(
      fc.asyncProperty(postUrls, bodyArb, async (url, body) => {
        const response = await h.app.inject({
          method: 'POST',
          url,
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify(body) ?? 'null',
        });
        expectClean(response);
      }),
      { numRuns: RUNS },
    );
  });

  test('raw bytes with any content type', async () => {
    await fc.assert(
      fc.asyncProperty(
        postUrls,
        fc.uint8Array({ maxLength: 512 }),
        fc.constantFrom(
          'application/json',
          'text/plain',
          'application/octet-stream',
          'multipart/form-data',
          'application/json; charset=latin1',
          'x',
        ),
        async (url, bytes, contentType) => {
          const response = await h.app.inject({
            method: 'POST',
            url,
            headers: { 'content-type': contentType },
            payload: Buffer.from(bytes),
          });
          expectClean(response);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('paths and methods', async () => {
    const segment = fc.oneof(
      fc.string({ maxLength: 70 }),
      fc.constantFrom('default', 'repo', 'hello', '..', '%', '%zz', ''),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH'),
        fc.constantFrom('sources', 'functions', 'triggers', 'jobs', 'ensure', 'validate', 'builds'),
        segment,
        segment,
        async (method, collection, ns, name) => {
          const url = `/v1/namespaces/${encodeURIComponent(ns)}/${collection}/${encodeURIComponent(name)}`;
          const response = await h.app.inject({ method, url });
          expectClean(response);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('arbitrary headers, including authorization and signatures', async () => {
    const headerValue = fc.string({ maxLength: 200 }).map((s) => s.replace(/[^\t\x20-\x7e]/g, ''));
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          fc.constantFrom(
            'authorization',
            'content-type',
            'x-hub-signature-256',
            'x-hub-signature',
            'x-gitlab-token',
            'x-github-event',
            'x-gitea-event',
            'x-gitlab-event',
            'x-github-delivery',
            'x-sless-signature',
            'accept',
            'content-encoding',
          ),
          headerValue,
        ),
        fc.constantFrom(
          '/v1/namespaces/default/sources',
          '/v1/webhooks/default/repo',
          '/v1/webhooks/default/other',
        ),
        async (headers, url) => {
          const response = await h.app.inject({
            method: 'POST',
            url,
            headers,
            payload: '{"ref":"refs/heads/main"}',
          });
          expectClean(response);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('webhook payloads, correctly signed or not: never a 500; a sync only for a signed push to main', async () => {
    /** The rule, written out independently of the code: signed, a GitHub push, a JSON object whose ref is main. */
    const shouldSync = (body: string, signed: boolean, event: string) => {
      if (!signed || event !== 'push') return false;
      try {
        const payload = JSON.parse(body) as unknown;
        return (
          payload !== null &&
          typeof payload === 'object' &&
          !Array.isArray(payload) &&
          (payload as { ref?: unknown }).ref === 'refs/heads/main'
        );
      } catch {
        return false;
      }
    };
    const outcomes = { synced: 0, ignored: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.jsonValue().map((v) => JSON.stringify(v) ?? ''),
          fc.string(),
          fc.constant('{"ref":"refs/heads/main"}'),
          fc.constant('{"ref":"refs/heads/dev"}'),
        ),
        fc.boolean(),
        fc.constantFrom('push', 'ping', 'Push Hook', 'issues'),
        async (body, signed, event) => {
          const before = h.syncCalls.length;
          const signature = signed
            ? `sha256=${createHmac('sha256', 'secret').update(body).digest('hex')}`
            : `sha256=${'0'.repeat(64)}`;
          const response = await h.app.inject({
            method: 'POST',
            url: '/v1/webhooks/default/repo',
            headers: {
              'content-type': 'application/json',
              'x-github-event': event,
              'x-hub-signature-256': signature,
            },
            payload: body,
          });
          expectClean(response);
          if (!signed) expect(response.statusCode).toBe(401);
          // The harness records a sync when the handler calls it, before the reply is sent.
          const expected = shouldSync(body, signed, event);
          expect(h.syncCalls.length - before, `${event} ${signed} ${body}`).toBe(expected ? 1 : 0);
          if (expected) expect(response.json()).toEqual({ status: 'accepted', source: 'default/repo' });
          outcomes[expected ? 'synced' : 'ignored']++;
        },
      ),
      // Both outcomes, whatever the random draw: the seeds below are a signed push to main and an
      // unsigned one.
      {
        numRuns: RUNS,
        examples: [
          ['{"ref":"refs/heads/main"}', true, 'push'],
          ['{"ref":"refs/heads/main"}', false, 'push'],
        ],
      },
    );
    expect(outcomes.synced).toBeGreaterThan(0);
    expect(outcomes.ignored).toBeGreaterThan(0);
  });
});

/** JSON text nested `depth` levels, as objects, arrays or both (text: stringify would overflow first). */
function nestedJson(depth: number, shape: 'object' | 'array' | 'mixed'): string {
  const open: string[] = [];
  const close: string[] = [];
  for (let i = 0; i < depth; i++) {
    const array = shape === 'array' || (shape === 'mixed' && i % 2 === 1);
    open.push(array ? '[' : '{"k":');
    close.push(array ? ']' : '}');
  }
  return `${open.join('')}"leaf"${close.reverse().join('')}`;
}

describe('deep nesting never breaks the API', () => {
  test('bodies and spec.event nested up to 10,000 levels: 400 past the limit, never a 500', async () => {
    const shapeArb = fc.constantFrom<'object' | 'array' | 'mixed'>('object', 'array', 'mixed');
    await fc.assert(
      fc.asyncProperty(
        postUrls,
        fc.integer({ min: 1, max: 10_000 }),
        shapeArb,
        fc.constantFrom('event', 'event', 'body', 'labels'),
        async (url, depth, shape, where) => {
          const deep = nestedJson(depth, shape);
          const payload =
            where === 'body'
              ? deep
              : where === 'labels'
                ? `{"apiVersion":"sless.dev/v1alpha1","kind":"FunctionJob","metadata":{"name":"j","labels":${deep}}}`
                : url.endsWith('/triggers')
                  ? `{"name":"deep","spec":{"function":"hello","type":"http","${where}":${deep}}}`
                  : url.endsWith('/validate')
                    ? `{"apiVersion":"sless.dev/v1alpha1","kind":"FunctionJob","metadata":{"name":"j"},"spec":{"function":"hello","runId":1,"${where}":${deep}}}`
                    : `{"name":"deep","spec":{"function":"hello","runId":1,"${where}":${deep}}}`;
          const response = await h.app.inject({
            method: 'POST',
            url,
            headers: { 'content-type': 'application/json' },
            payload,
          });
          expectClean(response);
          if (depth > 40 && url.endsWith('/validate')) expect(response.statusCode).toBe(400);
        },
      ),
      { numRuns: 80 },
    );
  });
});
