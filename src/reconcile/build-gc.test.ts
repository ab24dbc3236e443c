import { describe, expect, it } from 'vitest';
import type { StoredBuild } from '../core/interfaces.js';
import { type KeepRules, selectPrunable } from './build-gc.js';

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
