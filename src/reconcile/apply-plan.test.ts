/**
 * applyPlan on a MemoryStore: a sync writes only the objects a commit changed (spec, labels or other
 * annotations), not every object whose commit annotation moved, and prunes the ones the commit dropped.
 */
import { describe, expect, it } from 'vitest';
import { LABEL_PREVIEW, LABEL_PREVIEW_OF } from '../core/previews.js';
import { ANNOTATION_COMMIT, type GitSource, LABEL_SOURCE, type SlessFunction } from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { applyPlan } from './apply-plan.js';
import type { Plan } from './plan.js';

const source: GitSource = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'GitSource',
  metadata: { name: 'repo', namespace: 'default' },
  spec: { url: '/tmp/x', branch: 'main', path: '.', interval: '1m', suspend: false },
};

function fn(name: string, commit: string, code: string): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name,
      namespace: 'default',
      labels: { [LABEL_SOURCE]: 'repo' },
      annotations: { [ANNOTATION_COMMIT]: commit, 'sless.dev/build-key': code },
    },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  } as SlessFunction;
}

const plan = (objects: SlessFunction[]): Plan =>
  ({ commit: '', objects, functions: new Map(), manifestFiles: new Set(), issues: [] }) as Plan;

describe('applyPlan', () => {
  it('writes only the objects a commit changed, not every object with the new commit annotation', async () => {
    const store = new MemoryStore();
    const names = Array.from({ length: 50 }, (_, i) => `fn-${i}`);
    expect(await applyPlan(store, source, plan(names.map((n) => fn(n, 'c1', `k-${n}`))))).toEqual({
      changed: 50,
      pruned: 0,
    });
    const written: string[] = [];
    store.subscribe((event) => written.push(`${event.type} ${event.object.metadata.name}`));
    const second = names.map((n) => fn(n, 'c2', n === 'fn-7' ? 'k-new' : `k-${n}`));
    expect(await applyPlan(store, source, plan(second.filter((f) => f.metadata.name !== 'fn-9')))).toEqual({
      changed: 1,
      pruned: 1,
    });
    expect(written.sort()).toEqual(['DELETED fn-9', 'MODIFIED fn-7']);
    expect((await store.get('Function', 'default', 'fn-7'))?.metadata.annotations?.[ANNOTATION_COMMIT]).toBe(
      'c2',
    );
    expect((await store.get('Function', 'default', 'fn-8'))?.metadata.annotations?.[ANNOTATION_COMMIT]).toBe(
      'c1',
    );
  });

  it('writes a change of spec, labels or other annotations, whatever the commit annotation says', async () => {
    const store = new MemoryStore();
    const names = ['a', 'b', 'c', 'd'];
    await applyPlan(store, source, plan(names.map((n) => fn(n, 'c1', 'k'))));
    const next = names.map((n) => fn(n, 'c2', 'k'));
    (next[1] as SlessFunction).spec.memoryMb = 256;
    (next[2] as SlessFunction).metadata.labels = { [LABEL_SOURCE]: 'repo', team: 'x' };
    (next[3] as SlessFunction).metadata.annotations = {
      ...(next[3] as SlessFunction).metadata.annotations,
      note: 'y',
    };
    const written: string[] = [];
    store.subscribe((event) => written.push(event.object.metadata.name));
    // Passing the namespace's Functions, as a sync that listed them for its quota check does.
    const listed = await store.list('Function', { namespace: 'default' });
    expect(await applyPlan(store, source, plan(next), undefined, listed)).toEqual({ changed: 3, pruned: 0 });
    expect(written.sort()).toEqual(['b', 'c', 'd']);
    expect((await store.get('Function', 'default', 'b'))?.spec.memoryMb).toBe(256);
  });
  it('keeps the main branch and each preview to their own objects: neither prunes nor overwrites the other', async () => {
    const store = new MemoryStore();
    const previewOf = (name: string, label: string): SlessFunction => {
      const object = fn(`${name}--${label}`, 'c2', `k-${name}`);
      object.metadata.labels = {
        ...object.metadata.labels,
        [LABEL_PREVIEW]: label,
        [LABEL_PREVIEW_OF]: name,
      };
      return object;
    };
    await applyPlan(store, source, plan([fn('f', 'c1', 'k-f'), fn('g--x', 'c1', 'k-g')]));
    await applyPlan(store, source, plan([previewOf('f', 'y')]), undefined, undefined, 'y');
    // Main's next commit drops nothing of the preview; the preview's next commit nothing of main.
    expect(await applyPlan(store, source, plan([fn('f', 'c3', 'k-f'), fn('g--x', 'c1', 'k-g')]))).toEqual({
      changed: 0,
      pruned: 0,
    });
    expect(await applyPlan(store, source, plan([]), undefined, undefined, 'other')).toEqual({
      changed: 0,
      pruned: 0,
    });
    expect((await store.list('Function')).map((f) => f.metadata.name).sort()).toEqual(['f', 'f--y', 'g--x']);
    // A repository Function bearing a preview's name is refused both ways, never taken over.
    await expect(
      applyPlan(store, source, plan([previewOf('g', 'x')]), undefined, undefined, 'x'),
    ).rejects.toThrow('Function "g--x" already belongs to the main branch of source "repo"');
    await expect(
      applyPlan(store, source, plan([fn('f', 'c1', 'k-f'), fn('f--y', 'c1', 'k')])),
    ).rejects.toThrow('Function "f--y" already belongs to the preview "y" of source "repo"');
    expect((await store.get('Function', 'default', 'f--y'))?.metadata.labels?.[LABEL_PREVIEW]).toBe('y');
    expect(
      (await store.get('Function', 'default', 'g--x'))?.metadata.labels?.[LABEL_PREVIEW],
    ).toBeUndefined();
  });
});
