/**
 * A git remote for tests: a bare repository served over smart HTTP by `git http-backend`, with a working
 * repository that commits and force-pushes to it, all removed on close.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { git, TestRepo, tempDir } from './git.js';
import { startGitHttpServer } from './git-http-server.js';

/** A working repository that pushes to a bare one served over smart HTTP by `git http-backend`. */
export interface RemoteRepo {
  work: TestRepo;
  server: Awaited<ReturnType<typeof startGitHttpServer>>;
  /** The URL a GitSource uses. */
  url: string;
  /** Commits (null deletes) and pushes; returns the commit id. */
  push(files: Record<string, string | null>, message?: string): Promise<string>;
  close(): Promise<void>;
}

export async function startRemoteRepo(files: Record<string, string>): Promise<RemoteRepo> {
  const root = await tempDir('git-root');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  const server = await startGitHttpServer(root);
  const work = await TestRepo.create(files);
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');
  return {
    work,
    server,
    url: `${server.url}/fns.git`,
    push: async (changes, message) => {
      const commit = await work.commit(changes, message);
      await git(work.dir, 'push', '--quiet', '--force', 'origin', 'main');
      return commit;
    },
    close: async () => {
      await server.close();
      await work.remove();
      await rm(root, { recursive: true, force: true });
    },
  };
}
