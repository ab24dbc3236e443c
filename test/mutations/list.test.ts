/**
 * The guard mutation list stays applicable as code moves: each entry's `from` occurs exactly once in
 * its file and names test files that exist, so a refactor that moves a guard fails here, in every
 * run, instead of only when someone next runs `npm run mutate:guards`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MUTATIONS } from './list.js';

describe('the guard mutation list', () => {
  it('has unique ids', () => {
    const ids = MUTATIONS.map((m) => m.id);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
  });

  it.each(MUTATIONS.map((m) => [m.id, m] as const))('%s applies to exactly one place', (_id, m) => {
    expect(existsSync(m.file), m.file).toBe(true);
    const text = readFileSync(m.file, 'utf8');
    expect(text.split(m.from).length - 1).toBe(1);
    expect(m.to).not.toBe(m.from);
    expect(m.tests.length).toBeGreaterThan(0);
    for (const test of m.tests) expect(existsSync(test), test).toBe(true);
  });
});
