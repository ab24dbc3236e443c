/**
 * The guard table: every hand-written mutation of test/mutations/list.ts as a Markdown row under the
 * section its entry stands in (the list's `// ---- … ----` comments), naming the guard and the test
 * files one of which fails when the guard is weakened. `npm run mutate:guards -- --list` prints it.
 */
import type { GuardMutation } from './list.ts';

/** Section titles by the id of the first entry below each, read from the list's source text. */
function sectionsOf(source: string): Map<string, string> {
  const starts = new Map<string, string>();
  let pending: string | undefined;
  for (const line of source.split('\n')) {
    const title = /^\s*\/\/ ---- (.+) ----\s*$/.exec(line)?.[1];
    if (title) pending = title;
    const id = /^\s*id: '([^']+)',/.exec(line)?.[1];
    if (id && pending) {
      starts.set(id, pending);
      pending = undefined;
    }
  }
  return starts;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The table, one section after another in the list's order. */
export function guardTable(mutations: readonly GuardMutation[], source: string): string {
  const starts = sectionsOf(source);
  const out: string[] = [];
  for (const m of mutations) {
    const section = starts.get(m.id);
    if (section || out.length === 0)
      out.push('', `### ${section ?? 'Guards'}`, '', '| guard | weakening | caught by |', '|---|---|---|');
    out.push(`| ${cell(m.guard)} | \`${m.id}\` | ${m.tests.map((t) => `\`${t}\``).join(', ')} |`);
  }
  return `${out.join('\n').trimStart()}\n`;
}
