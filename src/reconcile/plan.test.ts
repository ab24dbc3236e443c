/**
 * Planning a sync: build keys depend on the function's code tree alone and keep golden values (images
 * and build records are named by them), config hashes move with what configures a function, planSource
 * turns loaded documents into the objects to apply with golden metadata, and the build-key cache hashes
 * only the functions whose code changed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashObject } from '../core/hash.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import type { GitSource } from '../core/resources.js';
import { RUNTIME_INFO } from '../core/runtimes.js';
import type { LoadResult } from '../manifest/load.js';
import { BuildKeyCache, computeBuildKey, computeConfigHash, planSource, sortedWithin } from './plan.js';

const files: TreeFile[] = [
  { path: 'fns/a/function.yaml', mode: '100644', oid: 'm1' },
  { path: 'fns/a/handler.js', mode: '100644', oid: 'h1' },
  { path: 'fns/a/lib/util.js', mode: '100644', oid: 'u1' },
  { path: 'fns/b/handler.js', mode: '100644', oid: 'x1' },
];
const manifests = new Set(['fns/a/function.yaml']);

/**
 * Build keys name images and build records, so a change of the formula silently rebuilds (or, worse,
 * fails to rebuild) every function. These were computed once from the formula and must only change
 * on purpose, together with every runtime version. They were computed outside TypeScript, as the
 * first 32 hex digits of sha256 over the key-sorted JSON {entrypoint?, runtime, runtimeVersion, tree}.
 */
const GOLDEN = {
  nodejs20: '7d760250ff0f3b694e2b9ce65854b371',
  go: '03a9df6a11b3ae917555fe61b02789b3',
  pythonRoot: '2c31b52aa2e153708bb048b1bb03027f',
};
const key = (
  tree: readonly TreeFile[],
  runtime: 'nodejs20' | 'go1.21' = 'nodejs20',
  entrypoint = 'handler.handle',
) => computeBuildKey({ runtime, entrypoint, codeDir: 'fns/a', files: tree, manifestFiles: manifests });

describe('build keys', () => {
  it('depend on the code tree only: not on manifests, not on other functions', () => {
    const base = key(files);
    expect(base).toMatch(/^[0-9a-f]{32}$/);
    expect(key(files.map((f) => (f.path === 'fns/a/function.yaml' ? { ...f, oid: 'm2' } : f)))).toBe(base);
    expect(key(files.map((f) => (f.path === 'fns/b/handler.js' ? { ...f, oid: 'x2' } : f)))).toBe(base);
    expect(key(files.map((f) => (f.path === 'fns/a/lib/util.js' ? { ...f, oid: 'u2' } : f)))).not.toBe(base);
    expect(key(files.map((f) => (f.path === 'fns/a/handler.js' ? { ...f, mode: '100755' } : f)))).not.toBe(
      base,
    );
    expect(key(files, 'go1.21')).not.toBe(base);
  });

  it('are a contract: fixed values for a fixed tree (images and build records are named by them)', () => {
    expect(key(files)).toBe(GOLDEN.nodejs20);
    expect(key(files, 'go1.21', 'handler.Handle')).toBe(GOLDEN.go);
    expect(
      computeBuildKey({
        runtime: 'python3.11',
        entrypoint: 'main.handle',
        codeDir: '',
        files: [{ path: 'main.py', mode: '100644', oid: 'p1' }],
        manifestFiles: new Set(),
      }),
    ).toBe(GOLDEN.pythonRoot);
  });

  it('do not take files from a sibling directory that shares the prefix (fns/a vs fns/ab)', () => {
    const withSibling = [...files, { path: 'fns/ab/handler.js', mode: '100644', oid: 's1' }];
    expect(key(withSibling)).toBe(key(files));
    const renamed = withSibling.map((f) => (f.path === 'fns/ab/handler.js' ? { ...f, oid: 's2' } : f));
    expect(key(renamed)).toBe(key(files));
    // A file named like the directory itself is not inside it either.
    expect(key([...files, { path: 'fns/a.js', mode: '100644', oid: 'z' }])).toBe(key(files));
  });

  it('change when the runtime version is bumped, so a runtime upgrade rebuilds', () => {
    const info = RUNTIME_INFO.nodejs20 as { version: string };
    const before = key(files);
    const version = info.version;
    try {
      info.version = `${version}-next`;
      expect(key(files)).not.toBe(before);
    } finally {
      info.version = version;
    }
    expect(key(files)).toBe(before);
  });

  it('include the entrypoint only for compiled runtimes', () => {
    expect(key(files, 'nodejs20', 'other.handle')).toBe(key(files));
    expect(key(files, 'go1.21', 'other.Handle')).not.toBe(key(files, 'go1.21', 'handler.Handle'));
  });

  it('are the same whatever order the tree is listed in', () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray(files, { minLength: files.length, maxLength: files.length }),
        (shuffled) => {
          expect(key([...shuffled].sort((a, b) => (a.path < b.path ? -1 : 1)))).toBe(key(files));
        },
      ),
    );
  });
});

describe('config hashes', () => {
  const spec = {
    runtime: 'nodejs20' as const,
    entrypoint: 'h.handle',
    memoryMb: 128,
    timeoutSec: 30,
    replicas: 1,
    env: { A: '1', B: '2' },
    source: { path: '.' },
  };
  it('change with env, memory, replicas and timeout, not with key order or the source path', () => {
    const base = computeConfigHash(spec);
    // Golden: the first 16 hex digits of sha256 over the key-sorted JSON of the spec minus `source`.
    expect(base).toBe('1e1b37db9913291c');
    expect(computeConfigHash({ ...spec, env: { B: '2', A: '1' } })).toBe(base);
    expect(computeConfigHash({ ...spec, source: { path: 'elsewhere' } })).toBe(base);
    expect(computeConfigHash({ ...spec, env: { A: '1', B: '3' } })).not.toBe(base);
    expect(computeConfigHash({ ...spec, memoryMb: 256 })).not.toBe(base);
    expect(computeConfigHash({ ...spec, replicas: 2 })).not.toBe(base);
    expect(computeConfigHash({ ...spec, timeoutSec: 5 })).not.toBe(base);
  });
});

describe('sortedWithin', () => {
  // `npm run mutate`: the binary search's `<` → `<=` survives and is equivalent: no file path
  // equals `dir/`.
  it('returns exactly the files below a directory of a path-sorted listing', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.array(fc.constantFrom('a', 'b', 'a-b', 'a.c', 'x'), { minLength: 1, maxLength: 4 }),
          {
            selector: (parts) => parts.join('/'),
          },
        ),
        fc.array(fc.constantFrom('a', 'b', 'a-b', 'a.c'), { minLength: 1, maxLength: 3 }),
        (paths, dirParts) => {
          const listing: TreeFile[] = paths
            .map((parts) => ({ path: parts.join('/'), mode: '100644', oid: 'o' }))
            .sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
          const dir = dirParts.join('/');
          expect(sortedWithin(listing, dir)).toEqual(listing.filter((f) => f.path.startsWith(`${dir}/`)));
        },
      ),
    );
  });
});

describe('sortedWithin at the root', () => {
  it('returns the whole listing for the root directory', () => {
    const listing: TreeFile[] = [
      { path: '/odd', mode: '100644', oid: 'o' },
      { path: 'a/x', mode: '100644', oid: 'o' },
    ];
    expect(sortedWithin(listing, '')).toBe(listing);
    expect(sortedWithin(listing, 'a')).toEqual([listing[1]]);
  });
});

describe('planSource', () => {
  const commit = 'c0ffee0000000000000000000000000000000000';
  const tree: TreeFile[] = [
    { path: 'fns/a/function.yaml', mode: '100644', oid: 'm1' },
    { path: 'fns/a/handler.js', mode: '100644', oid: 'h1' },
    { path: 'fns/a/lib/x.js', mode: '100644', oid: 'l1' },
    { path: 'fns/ab/handler.js', mode: '100644', oid: 'other' },
    { path: 'shared/b/main.py', mode: '100644', oid: 'p1' },
  ];
  const listed: string[] = [];
  const snapshot: SourceSnapshot = {
    commit,
    listFiles: async (dir) => {
      listed.push(dir);
      return tree.filter((f) => dir === '' || f.path.startsWith(`${dir}/`));
    },
    readFile: async () => new Uint8Array(),
  };
  const source = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: 'repo', namespace: 'team-a' },
    spec: { url: 'https://git.example.com/r.git', path: './fns/' },
  } as GitSource;
  const fnSpec = {
    runtime: 'nodejs20',
    entrypoint: 'handler.handle',
    memoryMb: 128,
    timeoutSec: 30,
    replicas: 1,
  };
  const loaded: LoadResult = {
    documents: [
      {
        kind: 'Function',
        file: 'fns/a/function.yaml',
        index: 0,
        codeDir: 'fns/a',
        doc: {
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'Function',
          metadata: { name: 'a', labels: { zone: 'z', app: 'x' }, annotations: { 'z.example/note': 'kept' } },
          spec: fnSpec,
        },
      },
      {
        kind: 'Trigger',
        file: 'fns/a/function.yaml',
        index: 1,
        doc: {
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'Trigger',
          metadata: { name: 'tick' },
          spec: { type: 'http', function: 'a' },
        },
      },
      {
        kind: 'Function',
        file: 'shared/b/function.yaml',
        index: 0,
        codeDir: 'shared/b',
        doc: {
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'Function',
          metadata: { name: 'b' },
          spec: { ...fnSpec, runtime: 'python3.11', entrypoint: 'main.handle' },
        },
      },
    ],
    manifestFiles: new Set(['fns/a/function.yaml', 'shared/b/function.yaml']),
    issues: [],
  };

  // `npm run mutate`: the mutants of sortRecord's `a > b ? 1 : 0` half survive and are equivalent.
  // Record keys are distinct, so `a <= b` equals `a < b`, and that half only runs when a > b; V8 sorts
  // records this small by binary insertion, which treats 0 and 1 alike.
  it('turns loaded documents into the objects to apply: golden metadata, sorted labels and annotations', async () => {
    listed.length = 0;
    const plan = await planSource(source, snapshot, loaded);
    expect(plan.commit).toBe(commit);
    expect(plan.issues).toEqual([]);
    expect(plan.manifestFiles).toBe(loaded.manifestFiles);
    // The source root is listed once; a code dir outside it is listed on its own.
    expect(listed).toEqual(['fns', 'shared/b']);
    const [a, tick, b] = plan.objects;
    // Golden: build key from the tree of fns/a minus its manifest (computed outside TypeScript).
    expect(a).toEqual({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: {
        name: 'a',
        namespace: 'team-a',
        labels: { app: 'x', 'sless.dev/source': 'repo', zone: 'z' },
        annotations: {
          'sless.dev/build-key': '8654199d13e04923698b910cc3b0c68d',
          'sless.dev/code-dir': 'fns/a',
          'sless.dev/commit': commit,
          'sless.dev/config-hash': '45f76f746329a5be',
          'sless.dev/manifest': 'fns/a/function.yaml#0',
          'z.example/note': 'kept',
        },
      },
      spec: fnSpec,
    });
    expect(Object.keys(a?.metadata.labels ?? {})).toEqual(['app', 'sless.dev/source', 'zone']);
    expect(Object.keys(a?.metadata.annotations ?? {})).toEqual([
      'sless.dev/build-key',
      'sless.dev/code-dir',
      'sless.dev/commit',
      'sless.dev/config-hash',
      'sless.dev/manifest',
      'z.example/note',
    ]);
    expect(tick).toEqual({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: {
        name: 'tick',
        namespace: 'team-a',
        labels: { 'sless.dev/source': 'repo' },
        annotations: { 'sless.dev/commit': commit, 'sless.dev/manifest': 'fns/a/function.yaml#1' },
      },
      spec: { type: 'http', function: 'a' },
    });
    expect(b?.metadata.annotations?.['sless.dev/build-key']).toBe(
      computeBuildKey({
        runtime: 'python3.11',
        entrypoint: 'main.handle',
        codeDir: 'shared/b',
        files: [{ path: 'shared/b/main.py', mode: '100644', oid: 'p1' }],
        manifestFiles: new Set(),
      }),
    );
    expect([...plan.functions.keys()]).toEqual(['a', 'b']);
    expect(plan.functions.get('a')).toEqual({
      object: a,
      buildKey: '8654199d13e04923698b910cc3b0c68d',
      configHash: '45f76f746329a5be',
      codeDir: 'fns/a',
    });
  });

  // `npm run mutate`: the default path `'.'` → `""` survives and is equivalent: both normalize to the
  // root.
  it('plans from the repository root when the source has no path', async () => {
    listed.length = 0;
    const { path: _path, ...spec } = source.spec;
    const plan = await planSource({ ...source, spec } as GitSource, snapshot, loaded);
    expect(listed).toEqual(['']);
    expect(plan.functions.get('a')?.buildKey).toBe('8654199d13e04923698b910cc3b0c68d');
    expect(plan.functions.get('b')?.codeDir).toBe('shared/b');
  });
});

describe('the build-key cache', () => {
  const many = (count: number, changed?: number) => {
    const tree: TreeFile[] = [];
    const loaded: LoadResult = { documents: [], manifestFiles: new Set(), issues: [] };
    for (let i = 0; i < count; i++) {
      const dir = `functions/fn-${i}`;
      tree.push({ path: `${dir}/function.yaml`, mode: '100644', oid: `m${i}` });
      tree.push({ path: `${dir}/handler.js`, mode: '100644', oid: i === changed ? `h${i}-new` : `h${i}` });
      loaded.manifestFiles.add(`${dir}/function.yaml`);
      loaded.documents.push({
        kind: 'Function',
        file: `${dir}/function.yaml`,
        index: 0,
        codeDir: dir,
        doc: {
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'Function',
          metadata: { name: `fn-${i}` },
          spec: { runtime: i % 2 ? 'nodejs20' : 'go1.21', entrypoint: 'handler.handle' },
        },
      });
    }
    tree.sort((a, b) => (a.path < b.path ? -1 : 1));
    const snapshot: SourceSnapshot = {
      commit: String(changed ?? 'base').padStart(40, '0'),
      listFiles: async () => tree,
      readFile: async () => new Uint8Array(),
    };
    return { snapshot, loaded };
  };
  const source = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: 'repo', namespace: 'default' },
    spec: { url: '/repo', branch: 'main', path: '.' },
  } as GitSource;
  const keysOf = (plan: { functions: Map<string, { buildKey: string }> }) =>
    [...plan.functions].map(([name, f]) => `${name}=${f.buildKey}`);

  it('hashes only the functions whose code changed, and gives the keys computed afresh', async () => {
    const hashed: string[] = [];
    const cache = new BuildKeyCache(20_000, (inputs) => {
      hashed.push(inputs.tree.map((entry) => entry[2]).join());
      return hashObject(inputs).slice(0, 32);
    });
    const before = many(100);
    await planSource(source, before.snapshot, before.loaded, { buildKeys: cache });
    expect(hashed).toHaveLength(100);
    hashed.length = 0;
    const after = many(100, 41);
    const cached = await planSource(source, after.snapshot, after.loaded, { buildKeys: cache });
    expect(hashed).toEqual(['h41-new']);
    expect(keysOf(cached)).toEqual(keysOf(await planSource(source, after.snapshot, after.loaded)));
    expect(cached.functions.get('fn-41')?.buildKey).not.toBe(
      (await planSource(source, before.snapshot, before.loaded)).functions.get('fn-41')?.buildKey,
    );
  });
});
