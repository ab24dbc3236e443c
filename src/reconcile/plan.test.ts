import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TreeFile } from '../core/interfaces.js';
import { computeBuildKey, computeConfigHash, sortedWithin } from './plan.js';

const files: TreeFile[] = [
  { path: 'fns/a/function.yaml', mode: '100644', oid: 'm1' },
  { path: 'fns/a/handler.js', mode: '100644', oid: 'h1' },
  { path: 'fns/a/lib/util.js', mode: '100644', oid: 'u1' },
  { path: 'fns/b/handler.js', mode: '100644', oid: 'x1' },
];
const manifests = new Set(['fns/a/function.yaml']);
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
    expect(computeConfigHash({ ...spec, env: { B: '2', A: '1' } })).toBe(base);
    expect(computeConfigHash({ ...spec, source: { path: 'elsewhere' } })).toBe(base);
    expect(computeConfigHash({ ...spec, env: { A: '1', B: '3' } })).not.toBe(base);
    expect(computeConfigHash({ ...spec, memoryMb: 256 })).not.toBe(base);
    expect(computeConfigHash({ ...spec, replicas: 2 })).not.toBe(base);
    expect(computeConfigHash({ ...spec, timeoutSec: 5 })).not.toBe(base);
  });
});

describe('sortedWithin', () => {
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
