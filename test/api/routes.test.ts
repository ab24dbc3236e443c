/**
 * The /v1 routes of the real API app over a MemoryStore, with the controller stood in by the harness:
 * sources registered, listed, synced and deleted; namespaces ensured exactly once under concurrency;
 * build histories, API triggers and jobs; public probes and metrics; and an OpenAPI document that lists
 * every promised route and only routes the app really serves.
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { BuildHistory } from '../../src/api/build-history.js';
import type { OpenApiDocument } from '../../src/api/openapi.js';
import { LABEL_SOURCE, type SlessFunction } from '../../src/core/resources.js';
import { fn, gitSource, type Harness, startHarness } from './harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(() => h.close());

describe('sources', () => {
  test('register ({name, spec}), list, get, sync, delete', async () => {
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      payload: { name: 'repo', spec: { url: 'https://git.example.com/r.git', branch: 'prod' } },
    });
    expect(created.statusCode).toBe(201);
    // Defaults come from the one schema, and the object went to the store as applied.
    expect(created.json().spec).toEqual({
      url: 'https://git.example.com/r.git',
      branch: 'prod',
      path: '.',
      interval: '1m',
      suspend: false,
    });
    const stored = await h.store.get('GitSource', 'default', 'repo');
    expect(stored?.spec).toEqual(created.json().spec);

    const again = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      payload: { name: 'repo', spec: { url: 'https://git.example.com/r.git', branch: 'prod' } },
    });
    expect(again.statusCode).toBe(200);
    expect(again.json().metadata.generation).toBe(1);

    const list = await h.app.inject({ url: '/v1/namespaces/default/sources' });
    expect(list.json().items.map((s: { metadata: { name: string } }) => s.metadata.name)).toEqual(['repo']);
    const one = await h.app.inject({ url: '/v1/namespaces/default/sources/repo' });
    expect(one.json().spec.branch).toBe('prod');

    const sync = await h.app.inject({ method: 'POST', url: '/v1/namespaces/default/sources/repo/sync' });
    expect(sync.statusCode).toBe(200);
    expect(sync.json().outcome).toBe('unchanged');
    expect(h.syncCalls).toEqual([{ namespace: 'default', name: 'repo', force: true }]);

    const gone = await h.app.inject({ method: 'DELETE', url: '/v1/namespaces/default/sources/repo' });
    expect(gone.statusCode).toBe(204);
    expect(await h.store.get('GitSource', 'default', 'repo')).toBeUndefined();
  });

  test('a full GitSource document is accepted too', async () => {
    const doc = gitSource('default', 'full');
    const response = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/sources',
      payload: doc,
    });
    expect(response.statusCode).toBe(201);
    expect(response.json().metadata.namespace).toBe('default');
  });
});

describe('namespaces', () => {
  test('ensure: 201 then 200; exactly one 201 under concurrency; then it exists', async () => {
    const before = await h.app.inject({ url: '/v1/namespaces/team-a/functions' });
    expect(before.statusCode).toBe(404);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => h.app.inject({ method: 'POST', url: '/v1/namespaces/team-a/ensure' })),
    );
    const codes = answers.map((a) => a.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(1);
    expect(codes.filter((c) => c === 200)).toHaveLength(19);
    const after = await h.app.inject({ url: '/v1/namespaces/team-a/functions' });
    expect(after.statusCode).toBe(200);
    expect(after.json()).toEqual({ items: [] });
  });

  test('default exists; a namespace with objects exists', async () => {
    expect((await h.app.inject({ method: 'POST', url: '/v1/namespaces/default/ensure' })).statusCode).toBe(
      200,
    );
    await h.store.apply(fn('busy', 'x'));
    expect((await h.app.inject({ url: '/v1/namespaces/busy/functions' })).statusCode).toBe(200);
  });
});

describe('functions, triggers and jobs', () => {
  test('builds: history with log tails cut to ?tail lines', async () => {
    await h.store.apply(fn('default', 'hello'));
    const stored = (await h.store.get('Function', 'default', 'hello')) as SlessFunction;
    await h.store.patchStatus(stored, {
      lastBuild: {
        buildKey: 'k1',
        commit: 'a'.repeat(40),
        result: 'Failed',
        startedAt: '2026-01-01T00:00:00.000Z',
        logTail: 'one\ntwo\nthree',
      },
    });
    const response = await h.app.inject({ url: '/v1/namespaces/default/functions/hello/builds?tail=2' });
    expect(response.statusCode).toBe(200);
    expect(response.json().items).toEqual([
      expect.objectContaining({ buildKey: 'k1', logTail: 'two\nthree' }),
    ]);
    const bad = await h.app.inject({ url: '/v1/namespaces/default/functions/hello/builds?tail=-1' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toContain('querystring.tail');
  });

  test('builds: the history from the builder and the status merge, newest first, without duplicates', async () => {
    const history = new BuildHistory();
    const withHistory = await startHarness({ buildHistory: (ns, name) => history.list(ns, name) });
    try {
      await withHistory.store.apply(fn('default', 'hello'));
      const stored = (await withHistory.store.get('Function', 'default', 'hello')) as SlessFunction;
      const older = {
        buildKey: 'k1',
        commit: 'a',
        result: 'Succeeded' as const,
        startedAt: '2026-01-01T00:00:00.000Z',
      };
      const newer = {
        buildKey: 'k2',
        commit: 'b',
        result: 'Failed' as const,
        startedAt: '2026-01-02T00:00:00.000Z',
        logTail: 'x',
      };
      history.record(older, stored);
      history.record(newer, stored);
      await withHistory.store.patchStatus(stored, { lastBuild: newer });
      const response = await withHistory.app.inject({ url: '/v1/namespaces/default/functions/hello/builds' });
      expect(response.json().items.map((b: { buildKey: string }) => b.buildKey)).toEqual(['k2', 'k1']);
    } finally {
      await withHistory.close();
    }
  });

  test('API triggers: create, update, delete; a source-managed one is 409', async () => {
    await h.store.apply(fn('default', 'hello'));
    const body = { name: 'every-minute', spec: { type: 'cron', function: 'hello', schedule: '* * * * *' } };
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/triggers',
      payload: body,
    });
    expect(created.statusCode).toBe(201);
    expect(created.json().spec.enabled).toBe(true);
    const updated = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/triggers',
      payload: { ...body, spec: { ...body.spec, enabled: false } },
    });
    expect(updated.statusCode).toBe(200);
    expect(updated.json().metadata.generation).toBe(2);
    const deleted = await h.app.inject({
      method: 'DELETE',
      url: '/v1/namespaces/default/triggers/every-minute',
    });
    expect(deleted.statusCode).toBe(204);

    await h.store.apply({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 'from-git', namespace: 'default', labels: { [LABEL_SOURCE]: 'repo' } },
      spec: { type: 'http', function: 'hello', enabled: true },
    });
    const conflict = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/triggers',
      payload: { name: 'from-git', spec: { type: 'http', function: 'hello' } },
    });
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json().error).toContain('managed by GitSource repo');
    const noDelete = await h.app.inject({
      method: 'DELETE',
      url: '/v1/namespaces/default/triggers/from-git',
    });
    expect(noDelete.statusCode).toBe(409);
  });

  test('jobs: create with defaults, list and get', async () => {
    await h.store.apply(fn('default', 'hello'));
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/namespaces/default/jobs',
      payload: { name: 'once', spec: { function: 'hello', event: { a: 1 }, runId: 1 } },
    });
    expect(created.statusCode).toBe(201);
    const list = await h.app.inject({ url: '/v1/namespaces/default/jobs' });
    expect(list.json().items).toHaveLength(1);
    const one = await h.app.inject({ url: '/v1/namespaces/default/jobs/once' });
    expect(one.json().spec).toEqual({ function: 'hello', event: { a: 1 }, runId: 1 });
  });
});

describe('health, metrics and OpenAPI', () => {
  test('probes and metrics are public and well-formed', async () => {
    expect((await h.app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await h.app.inject({ url: '/readyz' })).json()).toEqual({
      status: 'ready',
      leader: { identity: 'local', holder: 'local', isLeader: true },
    });
    expect((await h.app.inject({ url: '/v1/leader' })).json()).toEqual({
      identity: 'local',
      holder: 'local',
      isLeader: true,
    });
    const metrics = await h.app.inject({ url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toContain('text/plain');
    expect(metrics.body).toContain('# TYPE sless_source_syncs_total counter');
  });

  test('/openapi.json lists every /v1 route with a valid structure', async () => {
    const response = await h.app.inject({ url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json() as OpenApiDocument;
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.info.title).toBeTruthy();

    // The routes the API promises (the README's API section), each documented...
    const promised = [
      'post /v1/namespaces/{ns}/ensure',
      'get /v1/namespaces/{ns}/sources',
      'post /v1/namespaces/{ns}/sources',
      'get /v1/namespaces/{ns}/sources/{name}',
      'delete /v1/namespaces/{ns}/sources/{name}',
      'post /v1/namespaces/{ns}/sources/{name}/sync',
      'get /v1/namespaces/{ns}/functions',
      'get /v1/namespaces/{ns}/functions/{name}',
      'get /v1/namespaces/{ns}/functions/{name}/builds',
      'post /v1/namespaces/{ns}/functions/{name}/rebuild',
      'get /v1/namespaces/{ns}/triggers',
      'post /v1/namespaces/{ns}/triggers',
      'get /v1/namespaces/{ns}/triggers/{name}',
      'delete /v1/namespaces/{ns}/triggers/{name}',
      'get /v1/namespaces/{ns}/jobs',
      'post /v1/namespaces/{ns}/jobs',
      'get /v1/namespaces/{ns}/jobs/{name}',
      'delete /v1/namespaces/{ns}/jobs/{name}',
      'post /v1/namespaces/{ns}/validate',
      'post /v1/webhooks/{ns}/{source}',
      'get /healthz',
      'get /readyz',
      'get /metrics',
    ];
    const documented = new Set<string>();
    for (const [path, operations] of Object.entries(doc.paths))
      for (const method of Object.keys(operations)) documented.add(`${method} ${path}`);
    for (const route of promised) expect(documented, route).toContain(route);
    // ...and everything documented is a route fastify really serves (no drift either way).
    for (const route of documented) {
      const [method, path] = route.split(' ') as [string, string];
      const url = path.replace(/\{(\w+)\}/g, ':$1');
      expect(h.app.hasRoute({ method: method.toUpperCase() as 'GET', url }), route).toBe(true);
    }

    const operationIds = new Set<string>();
    for (const [path, operations] of Object.entries(doc.paths)) {
      expect(path).toMatch(/^\//);
      expect(path).not.toContain(':');
      const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries(operations)) {
        expect(['get', 'post', 'put', 'delete', 'patch', 'options']).toContain(method);
        expect(op.operationId).toMatch(/^[a-zA-Z0-9]+$/);
        expect(operationIds.has(op.operationId), op.operationId).toBe(false);
        operationIds.add(op.operationId);
        expect(Object.keys(op.responses).length).toBeGreaterThan(0);
        for (const [code, r] of Object.entries(op.responses)) {
          expect(code).toMatch(/^(default|[1-5][0-9X]{2})$/);
          expect(typeof r.description).toBe('string');
        }
        const declared = op.parameters.filter((p) => p.in === 'path').map((p) => p.name);
        expect(declared.sort()).toEqual([...pathParams].sort());
        for (const p of op.parameters) expect(p.schema).toBeTypeOf('object');
        if (path.startsWith('/v1/namespaces/')) expect(op.security).toEqual([{ bearer: [] }]);
        if (path.startsWith('/v1/webhooks/')) expect(op.security).toBeUndefined();
        if (op.requestBody) {
          const schema = op.requestBody.content['application/json']?.schema;
          expect(schema).toBeTypeOf('object');
          expect(JSON.stringify(schema)).not.toContain('x-sless-kind');
        }
      }
    }
    // The resource bodies are the very schemas the manifests use.
    const register = doc.paths['/v1/namespaces/{ns}/sources']?.post;
    expect(JSON.stringify(register?.requestBody)).toContain('"interval"');
  });
});
