/**
 * Gives a first run without `--repo` something real to watch: a git repository made once from the
 * bundled examples, which the user can commit to and see the change deployed.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * `npm start` with no --repo watches a real git repository made from examples-repo/ on first run,
 * so the user can commit to it and watch the change go live.
 */
export async function ensureExamplesRepository(
  examplesDir: string,
  target: string,
): Promise<{ path: string; created: boolean }> {
  if (existsSync(join(target, '.git'))) return { path: target, created: false };
  await mkdir(target, { recursive: true });
  await cp(examplesDir, target, { recursive: true, filter: (source) => !source.includes('node_modules') });
  const git = (...args: string[]) => run('git', args, { cwd: target });
  await git('init', '--quiet', '--initial-branch=main');
  await git('add', '--all');
  await git(
    '-c',
    'user.name=sless',
    '-c',
    'user.email=sless@localhost',
    'commit',
    '--quiet',
    '-m',
    'Examples from sless',
  );
  return { path: target, created: true };
}
