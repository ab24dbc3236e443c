/**
 * The guard mutation list stays applicable as code moves: each entry's `from` occurs exactly once in
 * its file and names test files that exist, so a refactor that moves a guard fails here, in every
 * run, instead of only when someone next runs `npm run mutate:guards`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MUTATIONS } from './list.js';
import { guardTable } from './table.js';

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

  it('prints every entry once in the guard table, under every section the list names', () => {
    const source = readFileSync('test/mutations/list.ts', 'utf8');
    const table = guardTable(MUTATIONS, source);
    const rows = table.split('\n').filter((line) => /^\| .* \| `[a-z0-9-]+` \| /.test(line));
    expect(rows.map((row) => /\| `([a-z0-9-]+)` \|/.exec(row)?.[1])).toEqual(MUTATIONS.map((m) => m.id));
    const sections = [...source.matchAll(/^\s*\/\/ ---- (.+) ----\s*$/gm)].map((m) => m[1]);
    expect(table.match(/^### .+$/gm)).toEqual(sections.map((title) => `### ${title}`));
    const [first] = MUTATIONS;
    expect(rows[0]).toBe(
      `| ${first?.guard} | \`${first?.id}\` | ${first?.tests.map((t) => `\`${t}\``).join(', ')} |`,
    );
  });
});
