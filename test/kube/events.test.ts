/**
 * The dashboard's feed on kube, against the real API server: the store's watches turn a GitSource
 * written through the API (and the status the controller writes to it) into change events on the
 * namespace's stream, and the same page is served; the dashboard is platform-neutral.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { SseReader } from '../helpers/sse.js';
import { type KubeEnv, kubeEnv, logger } from './harness.js';

let env: KubeEnv;
let system: KubeSystem;
const readers: SseReader[] = [];

beforeAll(async () => {
  env = await kubeEnv('uievt');
  system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
});
afterAll(async () => {
  for (const reader of readers) reader.close();
  await system?.stop();
  await env?.close();
});

describe('kube: GET /v1/namespaces/{ns}/events and /ui/', () => {
  it('pushes a GitSource written through the API, and then its status, as the watches see them', async () => {
    // The namespace the controller watches (its store sees nothing of the others).
    const ns = env.ns;
    const reader = await SseReader.open(`${system.url}/v1/namespaces/${ns}/events`);
    readers.push(reader);
    expect(reader.status).toBe(200);
    await reader.next('hello', (e) => e.event === 'hello');
    const registered = await fetch(`${system.url}/v1/namespaces/${ns}/sources`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'site',
        spec: { url: 'https://git.example/acme/site.git', suspend: true },
      }),
    });
    expect(registered.status).toBe(201);
    const added = await reader.next(
      'added',
      (e) => (e.data as { type?: string }).type === 'ADDED',
      0,
      30_000,
    );
    expect(added.data).toMatchObject({ kind: 'GitSource', name: 'site' });
    // The controller says the source is suspended: a status write, pushed as MODIFIED.
    const suspended = await reader.next(
      'suspended status',
      (e) =>
        JSON.stringify((e.data as { object?: { status?: unknown } }).object?.status ?? {}).includes(
          'Suspended',
        ),
      0,
      30_000,
    );
    expect(suspended.data).toMatchObject({ type: 'MODIFIED', kind: 'GitSource', name: 'site' });
    const me = await (await fetch(`${system.url}/v1/whoami`)).json();
    expect(me).toMatchObject({ platform: 'kube', admin: true });
    expect((me as { namespaces: string[] }).namespaces).toContain(ns);
    const page = await fetch(`${system.url}/ui/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script type="module" src="main.js"></script>');
  });
});
