/**
 * syncPreviews on a MemoryStore with a fake reader whose branch list can fail: a failed listing
 * prunes nothing and says why; a preview's objects are renamed, labelled and set to rest at zero,
 * with the build key of the same code on main; a source that stops previewing prunes what it left.
 */
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { readerOf, silentLogger } from '../../test/helpers/reconcile-fakes.js';
import { ANNOTATION_PREVIEW_BRANCH, LABEL_PREVIEW, LABEL_PREVIEW_OF } from '../core/previews.js';
import {
  ANNOTATION_BUILD_KEY,
  type GitSource,
  type GitSourceStatus,
  LABEL_SOURCE,
  type SlessFunction,
} from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { syncPreviews } from './preview-sync.js';
import { syncSource } from './source-sync.js';

const MAIN = 'a'.repeat(40);
const BRANCH = 'b'.repeat(40);
const files = {
  'f/function.yaml': stringify({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name: 'f' },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', scale: { min: 2 } },
  }),
  'f/handler.js': 'exports.handle = () => 1;\n',
};

const source = (previews?: GitSource['spec']['previews']): GitSource => ({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'GitSource',
  metadata: { name: 'repo', namespace: 'default', generation: 1 },
  spec: {
    url: '/tmp/x',
    branch: 'main',
    path: '.',
    interval: '1m',
    suspend: false,
    ...(previews ? { previews } : {}),
  },
});

function readerWith(branches: { branch: string; commit: string }[] | Error) {
  return {
    ...readerOf({ head: MAIN, files }),
    listBranches: async () => {
      if (branches instanceof Error) throw branches;
      return branches;
    },
  };
}

describe('syncPreviews', () => {
  it('makes a preview of each matching branch, sharing the build key of the same code on main', async () => {
    const store = new MemoryStore();
    const deps = { store, logger: silentLogger };
    // The branch at main's commit: the same code, so the same build key.
    const reader = readerWith([
      { branch: 'main', commit: MAIN },
      { branch: 'feature/x', commit: MAIN },
    ]);
    await syncSource(
      deps,
      (await store.apply(source({ branches: ['feature/*'], idleSeconds: 7 }))) as GitSource,
      reader,
    );
    const main = (await store.get('Function', 'default', 'f')) as SlessFunction;
    const preview = (await store.get('Function', 'default', 'f--feature-x')) as SlessFunction;
    expect(preview.metadata.labels).toEqual({
      [LABEL_PREVIEW]: 'feature-x',
      [LABEL_PREVIEW_OF]: 'f',
      [LABEL_SOURCE]: 'repo',
    });
    expect(preview.metadata.annotations?.[ANNOTATION_PREVIEW_BRANCH]).toBe('feature/x');
    expect(preview.metadata.annotations?.[ANNOTATION_BUILD_KEY]).toBe(
      main.metadata.annotations?.[ANNOTATION_BUILD_KEY],
    );
    expect(preview.spec.scaleToZero).toEqual({ idleSeconds: 7 });
    expect(preview.spec.scale).toBeUndefined();
    expect(main.spec.scale).toEqual({ min: 2 });
    const status = (await store.get('GitSource', 'default', 'repo'))?.status as GitSourceStatus | undefined;
    expect(status?.previews).toEqual([
      { branch: 'feature/x', label: 'feature-x', commit: MAIN, urls: ['/fn/default/f@feature-x'] },
    ]);
  });

  it('prunes nothing when the branches cannot be listed, and says why', async () => {
    const store = new MemoryStore();
    const deps = { store, logger: silentLogger };
    const spec = source({ branches: ['feature/*'] });
    const status: GitSourceStatus = {};
    await syncPreviews(deps, spec, readerWith([{ branch: 'feature/x', commit: BRANCH }]), status);
    expect(status.previews?.map((p) => p.label)).toEqual(['feature-x']);
    const result = await syncPreviews(deps, spec, readerWith(new Error('HTTP 503')), status);
    expect(result.pruned).toEqual([]);
    expect(status.previewErrors).toEqual(['cannot list the branches: HTTP 503']);
    expect(await store.get('Function', 'default', 'f--feature-x')).toBeDefined();
  });

  it('prunes every preview once the source stops previewing, and leaves main alone', async () => {
    const store = new MemoryStore();
    const deps = { store, logger: silentLogger };
    const reader = readerWith([{ branch: 'feature/x', commit: BRANCH }]);
    await syncSource(deps, (await store.apply(source({ branches: ['feature/*'] }))) as GitSource, reader);
    expect((await store.list('Function')).map((f) => f.metadata.name).sort()).toEqual(['f', 'f--feature-x']);
    const stored = (await store.get('GitSource', 'default', 'repo')) as GitSource;
    await syncSource(deps, (await store.apply({ ...stored, spec: source().spec })) as GitSource, reader);
    expect((await store.list('Function')).map((f) => f.metadata.name)).toEqual(['f']);
    const status = (await store.get('GitSource', 'default', 'repo'))?.status as GitSourceStatus | undefined;
    expect(status?.previews).toBeUndefined();
  });
  it('counts previews against the namespace function quota: a branch past it is refused, named in status', async () => {
    const store = new MemoryStore();
    const deps = { store, logger: silentLogger, maxFunctions: 2 };
    const reader = readerWith([
      { branch: 'feature/a', commit: BRANCH },
      { branch: 'feature/b', commit: BRANCH },
    ]);
    await syncSource(deps, (await store.apply(source({ branches: ['feature/*'] }))) as GitSource, reader);
    expect((await store.list('Function')).map((f) => f.metadata.name).sort()).toEqual(['f', 'f--feature-a']);
    const status = (await store.get('GitSource', 'default', 'repo'))?.status as GitSourceStatus | undefined;
    expect(status?.previews?.map((p) => p.label)).toEqual(['feature-a']);
    expect(status?.previewErrors).toEqual([
      'branch "feature/b" not previewed: quota: namespace default may hold 2 functions; it holds 2 and the preview would add 1 (SLESS_QUOTA_FUNCTIONS)',
    ]);
  });
});
