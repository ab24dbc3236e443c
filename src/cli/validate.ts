/**
 * `sless validate [dir]`: the controller's manifest loader and schemas over a working tree, for CI
 * pipelines and pre-commit hooks. Prints one `file#doc field: reason` line per problem; the exit code
 * is 1 when there is any, 0 otherwise.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { formatIssue } from '../core/errors.js';
import { loadManifests } from '../manifest/load.js';
import { WorkingTreeSnapshot } from '../source/working-tree.js';
import { UsageError } from './usage.js';

export interface ValidateOutcome {
  exitCode: 0 | 1;
  lines: string[];
}

export async function validateWorkingTree(argv: string[]): Promise<ValidateOutcome> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { path: { type: 'string' }, namespace: { type: 'string' } },
  });
  if (positionals.length > 1) throw new UsageError('validate takes at most one directory');
  const dir = resolve(positionals[0] ?? '.');
  const isDirectory = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDirectory) throw new UsageError(`${dir} is not a directory`);
  const loaded = await loadManifests(new WorkingTreeSnapshot(dir), {
    root: values.path ?? '.',
    namespace: values.namespace,
  });
  if (loaded.issues.length > 0) return { exitCode: 1, lines: loaded.issues.map(formatIssue) };
  const counts = new Map<string, number>();
  for (const d of loaded.documents) counts.set(d.kind, (counts.get(d.kind) ?? 0) + 1);
  const summary = [...counts].map(([kind, n]) => `${n} ${kind}`).join(', ');
  return {
    exitCode: 0,
    lines: [`${loaded.documents.length} documents valid${summary ? ` (${summary})` : ''} in ${dir}`],
  };
}
