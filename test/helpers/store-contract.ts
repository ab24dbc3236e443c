/**
 * The ObjectStore contract, one suite for every implementation: MemoryStore (local) runs it as a unit
 * test, KubeStore against the real API server. Reconcilers rely on exactly these rules, so both
 * platforms must keep them: apply is idempotent and bumps the generation only for a spec change; status
 * is merged (an undefined field removes it) and never bumps the generation; get/list hide deleted
 * objects and list sorts by namespace and name; subscribers see ADDED, MODIFIED (statusOnly for status
 * writes) and DELETED.
 */
import { describe, expect, it } from 'vitest';
import type { ObjectStore, StoreEvent } from '../../src/core/interfaces.js';
import type { SlessFunction, Trigger } from '../../src/core/resources.js';

export interface StoreUnderTest {
  store: ObjectStore;
  /** A namespace of its own, empty. */
  namespace: string;
}

/** Polls (the kube store's events arrive through a watch) until the check passes; 20 s at most. */
async function until<T>(what: string, check: () => T | undefined | false): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not seen within 20 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function objectStoreContract(name: string, setup: () => Promise<StoreUnderTest>): void {
  const fn = (namespace: string, fnName: string, memoryMb = 128): SlessFunction => ({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name: fnName,
      namespace,
      labels: { 'sless.dev/source': 'repo' },
      annotations: { 'sless.dev/commit': 'c'.repeat(40) },
    },
    spec: {
      runtime: 'nodejs20',
      entrypoint: 'handler.handle',
      memoryMb,
      timeoutSec: 30,
      replicas: 1,
      env: { A: '1' },
      source: { path: '.' },
    },
  });
  const trigger = (namespace: string, triggerName: string, labels: Record<string, string>): Trigger => ({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Trigger',
    metadata: { name: triggerName, namespace, labels },
    spec: { type: 'http', function: 'f', enabled: true },
  });

  describe(`ObjectStore contract: ${name}`, () => {
    it('apply creates at generation 1 without status; the same spec again changes nothing; a new spec bumps it', async () => {
      const { store, namespace } = await setup();
      const created = await store.apply(fn(namespace, 'gen'));
      expect(created.metadata.generation).toBe(1);
      expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      const read = await store.get('Function', namespace, 'gen');
      expect(read?.spec).toEqual(fn(namespace, 'gen').spec);
      expect(read?.metadata.labels).toEqual({ 'sless.dev/source': 'repo' });
      expect(read?.metadata.annotations).toEqual({ 'sless.dev/commit': 'c'.repeat(40) });
      expect(read?.status).toBeUndefined();
      const again = await store.apply(fn(namespace, 'gen'));
      expect(again.metadata.generation).toBe(1);
      expect(again.metadata.resourceVersion).toBe(read?.metadata.resourceVersion);
      const changed = await store.apply(fn(namespace, 'gen', 256));
      expect(changed.metadata.generation).toBe(2);
      expect((await store.get('Function', namespace, 'gen'))?.spec.memoryMb).toBe(256);
    });

    it('status is merged, an undefined field removes it, and the generation stays', async () => {
      const { store, namespace } = await setup();
      const object = await store.apply(fn(namespace, 'status'));
      await store.patchStatus(object, { phase: 'Building', commit: 'a'.repeat(40) });
      const building = await store.get('Function', namespace, 'status');
      await store.patchStatus(building ?? object, { phase: 'Ready', commit: undefined, restarts: 0 });
      const ready = await store.get('Function', namespace, 'status');
      expect(ready?.status).toEqual({ phase: 'Ready', restarts: 0 });
      expect(ready?.metadata.generation).toBe(1);
      expect(ready?.spec).toEqual(fn(namespace, 'status').spec);
    });

    it('get and list see only their kind; list filters by namespace and labels, sorted by name', async () => {
      const { store, namespace } = await setup();
      await store.apply(trigger(namespace, 'b', { team: 'x' }));
      await store.apply(trigger(namespace, 'a', { team: 'x' }));
      await store.apply(trigger(namespace, 'c', { team: 'y' }));
      await store.apply(fn(namespace, 'a'));
      const names = (list: { metadata: { name: string } }[]) => list.map((o) => o.metadata.name);
      expect(names(await store.list('Trigger', { namespace }))).toEqual(['a', 'b', 'c']);
      expect(names(await store.list('Trigger', { namespace, labels: { team: 'x' } }))).toEqual(['a', 'b']);
      expect(names(await store.list('Function', { namespace }))).toEqual(['a']);
      expect(await store.get('FunctionJob', namespace, 'a')).toBeUndefined();
      expect((await store.get('Trigger', namespace, 'a'))?.kind).toBe('Trigger');
    });

    it('delete removes the object from get and list, and says whether there was one', async () => {
      const { store, namespace } = await setup();
      await store.apply(trigger(namespace, 'gone', {}));
      expect(await store.delete('Trigger', namespace, 'gone')).toBe(true);
      expect(await store.get('Trigger', namespace, 'gone')).toBeUndefined();
      expect(await store.list('Trigger', { namespace })).toEqual([]);
      expect(await store.delete('Trigger', namespace, 'gone')).toBe(false);
    });

    it('subscribers see ADDED, MODIFIED (statusOnly for a status write) and DELETED, then nothing after unsubscribing', async () => {
      const { store, namespace } = await setup();
      const events: StoreEvent[] = [];
      const mine = (e: StoreEvent) =>
        e.object.metadata.namespace === namespace && e.object.metadata.name === 'w';
      const unsubscribe = store.subscribe((e) => {
        if (mine(e)) events.push(e);
      });
      try {
        const object = await store.apply(trigger(namespace, 'w', {}));
        await until('ADDED', () => events.find((e) => e.type === 'ADDED'));
        await store.apply({
          ...trigger(namespace, 'w', {}),
          spec: { type: 'http', function: 'g', enabled: true },
        });
        const specChange = await until('MODIFIED (spec)', () =>
          events.find((e) => e.type === 'MODIFIED' && e.object.spec.function === 'g'),
        );
        expect(specChange.statusOnly).toBe(false);
        await store.patchStatus(object, { lastRun: '2026-01-01T00:00:00Z' });
        const statusChange = await until('MODIFIED (status)', () =>
          events.find((e) => e.type === 'MODIFIED' && e.object.status !== undefined),
        );
        expect(statusChange.statusOnly).toBe(true);
        await store.delete('Trigger', namespace, 'w');
        await until('DELETED', () => events.find((e) => e.type === 'DELETED'));
      } finally {
        unsubscribe();
      }
      // After unsubscribing, a positive signal on a second subscriber comes first, then nothing here.
      const count = events.length;
      const seen: StoreEvent[] = [];
      const other = store.subscribe((e) => {
        if (mine(e)) seen.push(e);
      });
      try {
        await store.apply(trigger(namespace, 'w', {}));
        await until('ADDED for the second subscriber', () => seen.find((e) => e.type === 'ADDED'));
        expect(events.length).toBe(count);
      } finally {
        other();
      }
    });
  });
}
