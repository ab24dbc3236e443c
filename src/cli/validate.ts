/**
 * `sless validate [dir]`: the controller's manifest loader and schemas over a working tree, for CI
 * pipelines and pre-commit hooks. Prints one `file#doc field: reason` line per problem; the exit code
 * is 1 when there is any, 0 otherwise.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { formatIssue } from '../core/errors.js';
import { endOfLifeWarning } from '../core/runtimes.js';
import { RUNTIMES, type RuntimeName } from '../core/schemas.js';
import { type LoadedDocument, loadManifests } from '../manifest/load.js';
import { resolveToolchain } from '../platform/local/toolchains.js';
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
    lines: [
      `${loaded.documents.length} documents valid${summary ? ` (${summary})` : ''} in ${dir}`,
      ...runtimeWarnings(loaded.documents),
    ],
  };
}

/**
 * Warnings that do not fail validation: a runtime past its end of life (it still builds and runs),
 * and a runtime whose toolchain this machine lacks for the local platform (kube images carry theirs).
 */
function runtimeWarnings(documents: readonly LoadedDocument[]): string[] {
  const today = new Date().toISOString().slice(0, 10);
  const lines: string[] = [];
  for (const d of documents) {
    if (d.kind !== 'Function') continue;
    const runtime = (d.doc.spec as { runtime?: unknown } | undefined)?.runtime;
    if (typeof runtime !== 'string' || !(RUNTIMES as readonly string[]).includes(runtime)) continue;
    const where = `${d.file}#${d.index} spec.runtime`;
    const eol = endOfLifeWarning(runtime as RuntimeName, today);
    if (eol) lines.push(`warning: ${where}: ${eol}`);
    const toolchain = resolveToolchain(runtime as RuntimeName);
    if (!toolchain.found)
      lines.push(`warning: ${where}: the local platform cannot run it here: ${toolchain.reason}`);
  }
  return lines;
}
