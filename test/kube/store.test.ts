/**
 * The CRDs and the KubeStore on a real API server: schema validation by the server, objects that read
 * back exactly as applied (an empty string stays an empty string, never null), status via the status subresource,
 * and statusOnly events that stop status writes from re-triggering reconciles (else each write
 * wakes a reconcile that writes again).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreEvent } from '../../src/core/interfaces.js';
import { ReconcileRequests } from '../../src/core/reconcile-requests.js';
import type { FunctionJob, GitSource, SlessFunction, Trigger } from '../../src/core/resources.js';
import { KubeApiError } from '../../src/platform/kube/http.js';
import { KubeStore } from '../../src/platform/kube/kube-store.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { slessType } from '../../src/platform/kube/resource-types.js';
import { createNamespace, eventually, type KubeEnv, kubeEnv, logger } from './harness.js';

let env: KubeEnv;
let store: KubeStore;
beforeAll(async () => {
  env = await kubeEnv('store');
  store = new KubeStore({ http: env.http, logger, namespaces: [env.ns] });
});
afterAll(async () => {
  store?.stop();
  await env?.close();
});

const fnObject = (name: string, spec: Partial<SlessFunction['spec']> = {}): SlessFunction => ({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: {
    name,
    namespace: env.ns,
    labels: { 'sless.dev/source': 'repo', team: 'a' },
    annotations: { 'sless.dev/commit': 'c'.repeat(40), 'sless.dev/code-dir': 'fns/x' },
  },
  spec: {
    runtime: 'python3.11',
    entrypoint: 'main.handle',
    memoryMb: 128,
    timeoutSec: 30,
    replicas: 1,
    env: { B: '2', A: '1', EMPTY: '' },
    source: { path: '.' },
    ...spec,
  },
});

describe('CRDs on the API server', () => {
  it('the server rejects memoryMb: 0 and an unknown runtime', async () => {
    const zero = await store.apply(fnObject('bad', { memoryMb: 0 })).catch((e: unknown) => e);
    expect(zero).toBeInstanceOf(KubeApiError);
    expect((zero as KubeApiError).code).toBe(422);
    expect((zero as KubeApiError).message).toContain('memoryMb');
    const runtime = await store
      .apply(fnObject('bad2', { runtime: 'cobol' as unknown as 'nodejs20' }))
      .catch((e: unknown) => e);
    expect((runtime as KubeApiError).code).toBe(422);
  });

  it('every kind reads back exactly as it was applied (no "" turned into null, no field lost)', async () => {
    const fn = fnObject('readback');
    const trigger: Trigger = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 'every-minute', namespace: env.ns, labels: { 'sless.dev/source': 'repo' } },
      spec: {
        type: 'cron',
        function: 'readback',
        schedule: '* * * * *',
        enabled: true,
        event: { nested: { list: [1, 'two', null], empty: '' } },
      },
    };
    const job: FunctionJob = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'FunctionJob',
      metadata: { name: 'once', namespace: env.ns },
      spec: { function: 'readback', runId: 0, event: { a: '' } },
    };
    for (const object of [fn, trigger, job]) {
      await store.apply(object);
      const back = await store.get(object.kind, env.ns, object.metadata.name);
      expect(back?.spec).toEqual(object.spec);
      expect(back?.metadata.labels ?? {}).toEqual(object.metadata.labels ?? {});
      expect(back?.metadata.annotations ?? {}).toEqual(object.metadata.annotations ?? {});
      // Re-applying the same object is a no-op for the server: nothing moves, nothing rolls.
      const again = await store.apply(object);
      expect(again.metadata.resourceVersion).toBe(back?.metadata.resourceVersion);
    }
  });

  it('status goes through /status, replaces nested fields, and never bumps generation', async () => {
    const fn = (await store.get('Function', env.ns, 'readback')) as SlessFunction;
    await store.patchStatus(fn, {
      phase: 'Failed',
      lastBuild: {
        buildKey: 'k',
        commit: 'c',
        result: 'Failed',
        startedAt: 't',
        message: 'boom',
        logTail: 'x',
      },
    });
    const failed = (await store.get('Function', env.ns, 'readback')) as SlessFunction;
    await store.patchStatus(failed, {
      phase: 'Ready',
      lastBuild: { buildKey: 'k', commit: 'c', result: 'Succeeded', startedAt: 't' },
      lastError: undefined,
    });
    const ready = (await store.get('Function', env.ns, 'readback')) as SlessFunction;
    expect(ready.status?.lastBuild).toEqual({
      buildKey: 'k',
      commit: 'c',
      result: 'Succeeded',
      startedAt: 't',
    });
    expect(ready.metadata.generation).toBe(fn.metadata.generation);
  });

  it('a status it wrote is what peek gives at once, not one watch event later', async () => {
    const own = new KubeStore({ http: env.http, logger, namespaces: [env.ns] });
    try {
      const fn = await own.apply(fnObject('written-through'));
      own.watch();
      await eventually('listed', async () => own.peek('Function', env.ns, 'written-through'));
      // The watch stops here: from now on only the store's own writes can tell peek anything.
      own.stop();
      await own.patchStatus(fn, { phase: 'Disabled' });
      expect(own.peek('Function', env.ns, 'written-through')?.status?.phase).toBe('Disabled');
    } finally {
      own.stop();
    }
  });

  it('watch events: status writes are statusOnly, spec and metadata changes are not, deletes are seen', async () => {
    const events: StoreEvent[] = [];
    // The watch cache exists once something subscribes and its first list is in.
    expect(store.cached('Function')).toBeUndefined();
    const unsubscribe = store.subscribe((e) => {
      if (e.object.metadata.name === 'watched') events.push(e);
    });
    try {
      await store.apply(fnObject('watched'));
      await eventually('ADDED', async () => events.some((e) => e.type === 'ADDED'));
      const fn = (await store.get('Function', env.ns, 'watched')) as SlessFunction;
      await store.patchStatus(fn, { phase: 'Building' });
      await eventually('status event', async () => events.length >= 2);
      expect(events[1]).toMatchObject({ type: 'MODIFIED', statusOnly: true });
      await store.apply(fnObject('watched', { memoryMb: 512 }));
      await eventually('spec event', async () => events.length >= 3);
      expect(events[2]).toMatchObject({ type: 'MODIFIED', statusOnly: false });
      // The cache holds what the last event said, without managedFields, and hands out copies.
      const cached = store.cached('Function')?.find((f) => f.metadata.name === 'watched');
      expect(cached?.spec.memoryMb).toBe(512);
      expect(cached?.status?.phase).toBe('Building');
      expect(cached?.metadata).not.toHaveProperty('managedFields');
      (cached as SlessFunction).spec.memoryMb = 1;
      expect(store.cached('Function')?.find((f) => f.metadata.name === 'watched')?.spec.memoryMb).toBe(512);
      // Only what `keep` accepts is handed out (and copied).
      await store.apply(fnObject('bystander'));
      await eventually('a second Function cached', async () =>
        Boolean(store.cached('Function')?.some((f) => f.metadata.name === 'bystander')),
      );
      expect(store.cached('Function', (f) => f.spec.memoryMb === 512)?.map((f) => f.metadata.name)).toEqual([
        'watched',
      ]);
      await store.delete('Function', env.ns, 'bystander');
      const relabelled = fnObject('watched', { memoryMb: 512 });
      relabelled.metadata.labels = { ...relabelled.metadata.labels, team: 'b' };
      await store.apply(relabelled);
      await eventually('label event', async () => events.length >= 4);
      expect(events[3]).toMatchObject({ type: 'MODIFIED', statusOnly: false });
      // Deleting a Function starts its finalizer; reconcilers see it as gone at once.
      await store.delete('Function', env.ns, 'watched');
      await eventually('DELETED', async () => events.some((e) => e.type === 'DELETED'));
      expect(await store.get('Function', env.ns, 'watched')).toBeUndefined();
      expect(events.filter((e) => e.type === 'DELETED')).toHaveLength(1);
      expect(store.cached('Function')?.map((f) => f.metadata.name)).not.toContain('watched');
    } finally {
      unsubscribe();
    }
  });

  it("asks for a deleting Function's reconcile until its reconciler releases the finalizer, and nothing cleans it on its own", async () => {
    // Its own namespace: the other store here watches env.ns.
    const ns = `${env.ns}-fin`;
    await createNamespace(env.http, ns);
    const requests = new ReconcileRequests();
    const asked: string[] = [];
    requests.subscribe((r) => asked.push(`${r.kind} ${r.namespace}/${r.name}`));
    const store = new KubeStore({
      http: env.http,
      logger,
      namespaces: [ns],
      finalizerRetryMs: 100,
      requests,
    });
    const unsubscribe = store.subscribe(() => {});
    const raw = () => getObject<KubeObject>(env.http, slessType('Function'), ns, 'finalized');
    try {
      await store.apply({
        ...fnObject('finalized'),
        metadata: { ...fnObject('finalized').metadata, namespace: ns },
      });
      expect((await raw())?.metadata.finalizers).toEqual(['sless.dev/cleanup']);
      await store.delete('Function', ns, 'finalized');
      // Asked for, and asked again while the finalizer holds it: the first request may have found no
      // controller, and a cleanup that failed is tried again the same way.
      await eventually('asked three times', async () => asked.length >= 3);
      expect(new Set(asked)).toEqual(new Set([`Function ${ns}/finalized`]));
      expect((await raw())?.metadata.deletionTimestamp).toBeDefined();
      expect(await store.get('Function', ns, 'finalized')).toBeUndefined();

      await store.releaseFinalizer('Function', ns, 'finalized');
      await eventually('Function gone', async () => (await raw()) === undefined);
      // Once gone, nobody is asked again.
      await new Promise((r) => setTimeout(r, 300));
      const settled = asked.length;
      await new Promise((r) => setTimeout(r, 300));
      expect(asked.length).toBe(settled);
    } finally {
      unsubscribe();
      store.stop();
    }
  });

  it("asks for a deleting GitSource's reconcile until its reconciler releases the finalizer, and releases only a deleting one", async () => {
    const ns = `${env.ns}-src`;
    await createNamespace(env.http, ns);
    const requests = new ReconcileRequests();
    const asked: string[] = [];
    requests.subscribe((r) => asked.push(`${r.kind} ${r.namespace}/${r.name}`));
    const sources = new KubeStore({
      http: env.http,
      logger,
      namespaces: [ns],
      finalizerRetryMs: 100,
      requests,
    });
    const unsubscribe = sources.subscribe(() => {});
    const source = (name: string): GitSource => ({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'GitSource',
      metadata: { name, namespace: ns },
      spec: { url: 'https://git.test/repo.git', branch: 'main', path: '.', interval: '1m', suspend: false },
    });
    const raw = (name: string) => getObject<KubeObject>(env.http, slessType('GitSource'), ns, name);
    try {
      await sources.apply(source('kept'));
      await sources.apply(source('going'));
      // A source that is not being deleted keeps its finalizer, whoever asks.
      await sources.releaseFinalizer('GitSource', ns, 'kept');
      expect((await raw('kept'))?.metadata.finalizers).toEqual(['sless.dev/cleanup']);
      expect(asked).toEqual([]);

      await sources.delete('GitSource', ns, 'going');
      // Asked for, and asked again while the finalizer holds it (no controller may have heard the first).
      await eventually('asked twice', async () => asked.length >= 2);
      expect(new Set(asked)).toEqual(new Set([`GitSource ${ns}/going`]));
      expect((await raw('going'))?.metadata.deletionTimestamp).toBeDefined();

      // What its reconciler does once it pruned: the finalizer goes, and so does the source.
      await sources.releaseFinalizer('GitSource', ns, 'going');
      await eventually('GitSource gone', async () => (await raw('going')) === undefined);
      await new Promise((r) => setTimeout(r, 300));
      const settled = asked.length;
      await new Promise((r) => setTimeout(r, 300));
      expect(asked.length).toBe(settled);
    } finally {
      unsubscribe();
      sources.stop();
    }
  });
});
