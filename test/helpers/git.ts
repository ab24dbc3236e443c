/**
 * Git repositories for tests, made with the git CLI as a user would (fixed author, no system config):
 * TestRepo writes, commits and removes, and small builders give Function manifests, Node handlers and
 * GitSources.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { GitSource } from '../../src/core/resources.js';

const exec = promisify(execFile);

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
};

export function git(cwd: string, ...args: string[]): Promise<string> {
  return gitWith(cwd, {}, ...args);
}

async function gitWith(cwd: string, env: Record<string, string>, ...args: string[]): Promise<string> {
  const { stdout } = await exec('git', args, { cwd, env: { ...process.env, ...GIT_ENV, ...env } });
  return stdout.trim();
}

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `sless-${prefix}-`));
}

/** A working repository made with the git CLI, as a user would. */
export class TestRepo {
  readonly dir: string;
  private constructor(dir: string) {
    this.dir = dir;
  }

  static async create(files: Record<string, string> = {}): Promise<TestRepo> {
    const repo = new TestRepo(await tempDir('repo'));
    await git(repo.dir, 'init', '--quiet', '--initial-branch=main');
    if (Object.keys(files).length > 0) await repo.commit(files, 'initial');
    return repo;
  }

  async write(files: Record<string, string | null>): Promise<void> {
    for (const [path, content] of Object.entries(files)) {
      const full = join(this.dir, path);
      if (content === null) {
        await rm(full, { recursive: true, force: true });
      } else {
        await mkdir(dirname(full), { recursive: true });
        await writeFile(full, content);
      }
    }
  }

  /** Writes (null deletes) and commits; returns the new commit id. */
  async commit(files: Record<string, string | null>, message = 'change'): Promise<string> {
    await this.write(files);
    await git(this.dir, 'add', '--all');
    await git(this.dir, 'commit', '--quiet', '--allow-empty', '-m', message);
    return git(this.dir, 'rev-parse', 'HEAD');
  }

  /**
   * Commits a tree of exactly `files` as the head of `branch`, a history of its own, without touching
   * the work tree, the index or the branch checked out; returns the new commit id.
   */
  async commitBranch(
    branch: string,
    files: Record<string, string>,
    message = `on ${branch}`,
  ): Promise<string> {
    const scratch = await tempDir('branch');
    try {
      const env = { GIT_INDEX_FILE: join(scratch, 'index') };
      for (const [index, [path, content]] of Object.entries(files).entries()) {
        const file = join(scratch, `blob-${index}`);
        await writeFile(file, content);
        const blob = await gitWith(this.dir, env, 'hash-object', '-w', file);
        await gitWith(this.dir, env, 'update-index', '--add', '--cacheinfo', `100644,${blob},${path}`);
      }
      const tree = await gitWith(this.dir, env, 'write-tree');
      const commit = await git(this.dir, 'commit-tree', tree, '-m', message);
      await git(this.dir, 'update-ref', `refs/heads/${branch}`, commit);
      return commit;
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

export function functionManifest(name: string, spec: Record<string, unknown> = {}): string {
  const body = { runtime: 'nodejs20', entrypoint: 'handler.handle', ...spec };
  return `apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata:\n  name: ${name}\nspec: ${JSON.stringify(body)}\n`;
}

export function nodeHandler(body: string): string {
  return `exports.handle = async (event, context) => { ${body} };\n`;
}

/** A GitSource on `main`, polled hourly: tests sync explicitly or through the repository watch. */
export function gitSource(
  name: string,
  namespace: string,
  url: string,
  spec: Partial<GitSource['spec']> = {},
): GitSource {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name, namespace },
    spec: { url, branch: 'main', path: '.', interval: '1h', suspend: false, ...spec },
  };
}
