/**
 * Bad requests to the real API app (injected, over a MemoryStore): each row of a table of invalid
 * bodies, paths and names answers its status with a single {error} naming the problem, nothing invalid
 * reaches the store, and malformed JSON, a wrong media type and an oversized body are 4xx with {error}.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { fn, type Harness, startHarness } from './harness.js';

/** The negative table: each bad request, its status and the words its message must hold. */
const fnDoc = (spec: Record<string, unknown>) => ({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'f' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', ...spec },
});

interface Row {
  name: string;
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  body?: unknown;
  status: number;
  message: string | RegExp;
}

const rows: Row[] = [
  {
    name: 'unknown runtime',
    method: 'POST',
    url: '/v1/namespaces/default/validate',
    body: fnDoc({ runtime: 'java17' }),
    status: 400,
    message:
      'spec.runtime: must be one of: nodejs20, python3.11, go1.21, nodejs22, nodejs24, python3.12, python3.13, go1.25, go1.26, go1.27',
  },
  ...[-10, 0].map((memoryMb) => ({
    name: `memoryMb ${memoryMb}`,
    method: 'POST' as const,
    url: '/v1/namespaces/default/validate',
    body: fnDoc({ memoryMb }),
    status: 400,
    message: 'spec.memoryMb: must be >= 1',
  })),
  {
    name: 'memoryMb 999999 (never clamped)',
    method: 'POST',
    url: '/v1/namespaces/default/validate',
    body: fnDoc({ memoryMb: 999999 }),
    status: 400,
    message: 'spec.memoryMb: must be <= 4096',
  },
  {
    name: 'missing entrypoint',
    method: 'POST',
    url: '/v1/namespaces/default/validate',
    body: { ...fnDoc({}), spec: { runtime: 'nodejs20' } },
    status: 400,
    message: 'spec.entrypoint: is required',
  },
  {
    name: 'unknown trigger type',
    method: 'POST',
    url: '/v1/namespaces/default/triggers',
    body: { name: 't', spec: { type: 'rabbitmq', function: 'hello' } },
    status: 400,
    message: 'spec.type: must be one of: http, cron',
  },
  {
    name: 'trigger for a missing function',
    method: 'POST',
    url: '/v1/namespaces/default/triggers',
    body: { name: 't', spec: { type: 'http', function: 'ghost' } },
    status: 404,
    message: 'spec.function: Function default/ghost not found',
  },
  {
    name: 'job for a missing function',
    method: 'POST',
    url: '/v1/namespaces/default/jobs',
    body: { name: 'j', spec: { function: 'ghost', event: { a: 1 }, runId: 1 } },
    status: 404,
    message: 'spec.function: Function default/ghost not found',
  },
  {
    name: 'unknown namespace (list)',
    method: 'GET',
    url: '/v1/namespaces/nowhere/functions',
    status: 404,
    message: 'namespace nowhere not found',
  },
  {
    name: 'unknown namespace (get)',
    method: 'GET',
    url: '/v1/namespaces/nowhere/sources/x',
    status: 404,
    message: 'namespace nowhere not found',
  },
  {
    name: 'bad name in the path',
    method: 'GET',
    url: '/v1/namespaces/default/functions/Hello_World',
    status: 400,
    message: 'params.name: must be a DNS-1123 label',
  },
  {
    name: 'bad name in the body',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: { name: 'My.Repo', spec: { url: 'https://git.example.com/r.git' } },
    status: 400,
    message: 'metadata.name: must be a DNS-1123 label',
  },
  {
    name: 'bad namespace name',
    method: 'POST',
    url: '/v1/namespaces/UPPER/ensure',
    status: 400,
    message: 'params.ns: must be a DNS-1123 label',
  },
  {
    name: 'a source path that escapes the repository',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: { name: 'escape', spec: { url: 'https://git.example.com/r.git', path: '../x' } },
    status: 400,
    message: 'spec.path: must stay inside the repository',
  },
  {
    name: 'an absolute source path',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: { name: 'escape', spec: { url: 'https://git.example.com/r.git', path: '/etc' } },
    status: 400,
    message: 'spec.path: must stay inside the repository',
  },
  {
    name: 'a body naming another namespace',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'GitSource',
      metadata: { name: 's', namespace: 'other' },
      spec: { url: 'https://git.example.com/r.git' },
    },
    status: 400,
    message: 'does not match the path\'s namespace "default"',
  },
  {
    name: 'a cron trigger without schedule',
    method: 'POST',
    url: '/v1/namespaces/default/triggers',
    body: { name: 't', spec: { type: 'cron', function: 'hello' } },
    status: 400,
    message: 'spec.schedule: is required for a cron trigger',
  },
  {
    name: 'unknown field',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: { name: 's', spec: { url: 'https://git.example.com/r.git', brnch: 'x' } },
    status: 400,
    message: 'spec.brnch: unknown field',
  },
  {
    name: 'credentials in the URL',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    body: { name: 's', spec: { url: 'https://user:pw@git.example.com/r.git' } },
    status: 400,
    message: 'spec.url: must not embed credentials',
  },
  {
    name: 'unknown kind to validate',
    method: 'POST',
    url: '/v1/namespaces/default/validate',
    body: { apiVersion: 'sless.dev/v1alpha1', kind: 'Deployment', metadata: { name: 'x' }, spec: {} },
    status: 400,
    message: 'kind: must be one of: GitSource, Function, Trigger, FunctionJob',
  },
  {
    name: 'no body',
    method: 'POST',
    url: '/v1/namespaces/default/sources',
    status: 400,
    message: 'body: must be object',
  },
  {
    name: 'delete of a missing source',
    method: 'DELETE',
    url: '/v1/namespaces/default/sources/ghost',
    status: 404,
    message: 'GitSource default/ghost not found',
  },
  {
    name: 'sync of a missing source',
    method: 'POST',
    url: '/v1/namespaces/default/sources/ghost/sync',
    status: 404,
    message: 'GitSource default/ghost not found',
  },
  {
    name: 'builds of a missing function',
    method: 'GET',
    url: '/v1/namespaces/default/functions/ghost/builds',
    status: 404,
    message: 'Function default/ghost not found',
  },
  {
    name: 'unknown route',
    method: 'GET',
    url: '/v1/nothing-here',
    status: 404,
    message: 'no route for GET /v1/nothing-here',
  },
];

describe('negative table', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
    await h.store.apply(fn('default', 'hello'));
  });
  afterAll(() => h.close());

  test.each(rows)('$name → $status', async (row) => {
    const response = await h.app.inject({
      method: row.method,
      url: row.url,
      ...(row.body === undefined ? {} : { payload: row.body as object }),
    });
    expect(response.statusCode).toBe(row.status);
    const body = response.json() as { error: unknown };
    expect(Object.keys(body)).toEqual(['error']);
    expect(typeof body.error).toBe('string');
    if (typeof row.message === 'string') expect(body.error).toContain(row.message);
    else expect(body.error).toMatch(row.message);
  });

  test('nothing invalid reached the store', async () => {
    expect(await h.store.list('GitSource')).toEqual([]);
    expect(await h.store.list('Trigger')).toEqual([]);
    expect(await h.store.list('FunctionJob')).toEqual([]);
  });

  test('malformed JSON, wrong media type and oversized bodies are 4xx with {error}', async () => {
    const bad = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      headers: { 'content-type': 'application/json' },
      payload: '{"name": ',
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: expect.stringContaining('not valid JSON') });

    const media = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      headers: { 'content-type': 'application/xml' },
      payload: '<source/>',
    });
    expect(media.statusCode).toBe(415);
    expect(media.json()).toEqual({ error: expect.any(String) });

    const big = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x', spec: { url: 'https://a/b' }, pad: 'x'.repeat(1024 * 1024) }),
    });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({ error: expect.any(String) });
  });
});
