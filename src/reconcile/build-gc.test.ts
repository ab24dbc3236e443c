/**
 * Build garbage collection: selectPrunable keeps the newest builds by finish time, and whatever serves,
 * runs, or is pinned by build key or commit; BuildCollector reads only the functions a pass was asked
 * for (everything once, before removing), merges requests made together, and keeps the builds that
 * pending or running FunctionJobs use.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { BuildArchive, FunctionRef, StoredBuild } from '../core/interfaces.js';
import { LABEL_PREVIEW, LABEL_PREVIEW_OF } from '../core/previews.js';
import type { FunctionJob, SlessFunction } from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { BuildCollector, type KeepRules, selectPrunable } from './build-gc.js';

/** Build `n` of a function: key `k{n}`, commit `c{n}`, finished at minute n (higher is newer). */
function build(n: number, extra: Partial<StoredBuild> = {}): StoredBuild {
  return {
    id: `b${n}`,
    namespace: 'ns',
    name: 'fn',
    buildKey: `k${n}`,
    commit: `c${n}`,
    finishedAt: `2026-01-01T00:${String(n).padStart(2, '0')}:00Z`,
    running: false,
    serving: false,
    ...extra,
  };
}

const none: KeepRules = { buildKeys: new Set<string>(), commits: new Set<string>() };
const ids = (builds: StoredBuild[]) => builds.map((b) => b.id).sort();

describe('selectPrunable', () => {
  it.each([
    {
      what: 'fewer builds than the limit',
      builds: [1, 2, 3].map((n) => build(n)),
      limit: 5,
      rules: none,
      pruned: [],
    },
    {
      what: 'the oldest past the limit',
      builds: [1, 2, 3, 4, 5, 6, 7].map((n) => build(n)),
      limit: 5,
      rules: none,
      pruned: ['b1', 'b2'],
    },
    {
      what: 'order comes from finishedAt, not from the listing',
      builds: [7, 1, 5, 2, 6, 3, 4].map((n) => build(n)),
      limit: 3,
      rules: none,
      pruned: ['b1', 'b2', 'b3', 'b4'],
    },
    {
      what: 'a serving build past the limit stays',
      builds: [build(1, { serving: true }), ...[2, 3, 4].map((n) => build(n))],
      limit: 2,
      rules: none,
      pruned: ['b2'],
    },
    {
      what: "the Function's current build key stays (a pin's, too)",
      builds: [1, 2, 3, 4].map((n) => build(n)),
      limit: 1,
      rules: { buildKeys: new Set(['k2']), commits: new Set<string>() },
      pruned: ['b1', 'b3'],
    },
    {
      what: 'the build at a pinned commit stays',
      builds: [1, 2, 3, 4].map((n) => build(n)),
      limit: 1,
      rules: { buildKeys: new Set<string>(), commits: new Set(['c1']) },
      pruned: ['b2', 'b3'],
    },
    {
      what: 'a running build is neither pruned nor counted',
      builds: [build(9, { running: true, finishedAt: undefined }), ...[1, 2, 3].map((n) => build(n))],
      limit: 2,
      rules: none,
      pruned: ['b1'],
    },
    {
      what: 'limit 0 keeps only what is in use',
      builds: [build(1), build(2, { serving: true }), build(3)],
      limit: 0,
      rules: { buildKeys: new Set(['k3']), commits: new Set<string>() },
      pruned: ['b1'],
    },
    {
      what: "a deleted function's whole history, except what runs or serves",
      builds: [
        build(1),
        build(2, { serving: true }),
        build(3, { running: true, finishedAt: undefined }),
        build(4),
      ],
      limit: 5,
      rules: undefined,
      pruned: ['b1', 'b4'],
    },
  ])('$what', ({ builds, limit, rules, pruned }) => {
    expect(ids(selectPrunable(builds, limit, rules))).toEqual(pruned);
  });
});

describe('BuildCollector', () => {
  /** Two functions with three finished builds each; the archive records what it was asked for. */
  async function setup() {
    const store = new MemoryStore();
    for (const name of ['a', 'b'])
      await store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: { name, namespace: 'ns', labels: {}, annotations: { 'sless.dev/build-key': 'k3' } },
        spec: { runtime: 'nodejs20', entrypoint: 'h.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
      } as SlessFunction);
    const all = ['a', 'b'].flatMap((name) => [1, 2, 3].map((n) => build(n, { id: `${name}${n}`, name })));
    const asked: string[] = [];
    const removed: string[] = [];
    const archive: BuildArchive = {
      list: async (scope?: FunctionRef) => {
        asked.push(scope ? `${scope.namespace}/${scope.name}` : 'everything');
        return all.filter((b) => !removed.includes(b.id) && (!scope || b.name === scope.name));
      },
      remove: async (b: StoredBuild) => {
        removed.push(b.id);
      },
    };
    const gc = new BuildCollector({ store, archive, limit: 1, logger: pino({ level: 'silent' }) });
    return { gc, store, asked, removed };
  }

  it('a pass asked for one function reads and prunes only its builds; all builds only to remove', async () => {
    const { gc, asked, removed } = await setup();
    expect((await gc.collect([{ namespace: 'ns', name: 'a' }])).pruned.map((b) => b.id).sort()).toEqual([
      'a1',
      'a2',
    ]);
    // Everything is read once, before removing: what is removed must not be another function's.
    expect(asked).toEqual(['ns/a', 'everything']);
    expect(removed.sort()).toEqual(['a1', 'a2']);
    // Nothing left to prune: the function's own builds are all it reads.
    await gc.collect([{ namespace: 'ns', name: 'a' }]);
    expect(asked).toEqual(['ns/a', 'everything', 'ns/a']);
  });

  it('requests made together share one pass, and one without a function widens it to everything', async () => {
    const { gc, asked, removed } = await setup();
    gc.request(0, { namespace: 'ns', name: 'a' });
    gc.request(0, { namespace: 'ns', name: 'a' });
    gc.request(0, { namespace: 'ns', name: 'b' });
    await new Promise((r) => setTimeout(r, 10));
    await gc.collect([]);
    expect(asked).toEqual(['ns/a', 'ns/b', 'everything']);
    expect(removed.sort()).toEqual(['a1', 'a2', 'b1', 'b2']);

    const wide = await setup();
    wide.gc.request(0, { namespace: 'ns', name: 'a' });
    wide.gc.request(0);
    await new Promise((r) => setTimeout(r, 10));
    await wide.gc.collect([]);
    expect(wide.asked).toEqual(['everything']);
  });

  it("keeps the builds that a pending or running FunctionJob runs, and only those jobs'", async () => {
    const jobs: Array<[string, string, string]> = [
      ['waiting', 'Pending', 'k1'],
      ['under-way', 'Running', 'k2'],
      ['done', 'Succeeded', 'k1'],
    ];
    // A pass over everything and a pass over named functions read the jobs each their own way.
    for (const scope of [
      undefined,
      [
        { namespace: 'ns', name: 'a' },
        { namespace: 'ns', name: 'b' },
      ],
    ]) {
      const { gc, store, removed } = await setup();
      for (const [name, phase, buildKey] of jobs) {
        const job = await store.apply({
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'FunctionJob',
          metadata: { name, namespace: 'ns', labels: {}, annotations: {} },
          spec: { function: 'a', event: {}, runId: 1 },
        } as FunctionJob);
        await store.patchStatus(job, { phase, buildKey });
      }
      await gc.collect(scope);
      // b's builds k1 and k2 are not a's jobs' business: they go past the limit as usual.
      expect(removed.sort(), scope ? 'named functions' : 'everything').toEqual(['b1', 'b2']);
    }
  });
  it("keeps the build a branch preview of the function asks for, kept under the function's name", async () => {
    for (const scope of [undefined, [{ namespace: 'ns', name: 'a' }]]) {
      const { gc, store, removed } = await setup();
      await store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: {
          name: 'a--feature-x',
          namespace: 'ns',
          labels: { [LABEL_PREVIEW]: 'feature-x', [LABEL_PREVIEW_OF]: 'a' },
          annotations: { 'sless.dev/build-key': 'k1' },
        },
        spec: { runtime: 'nodejs20', entrypoint: 'h.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
      } as SlessFunction);
      await gc.collect(scope);
      expect(
        removed.filter((id) => id.startsWith('a')),
        scope ? 'named functions' : 'everything',
      ).toEqual(['a2']);
    }
  });
});
