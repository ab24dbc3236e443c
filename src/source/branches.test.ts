/**
 * What previews read of a repository: every branch and its head, from a repository on this machine
 * and from one behind smart HTTP (real `git http-backend`, through the guarded client), and a
 * preview's commit fetched by its branch's name into the same cache as the main branch.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git, tempDir } from '../../test/helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../../test/helpers/remote-repo.js';
import { guardedGitHttp } from './guarded-http.js';
import { OutboundPolicy } from './outbound.js';
import { LocalRepositoryReader, RemoteRepositoryReader } from './readers.js';

describe('branch listings', () => {
  let remote: RemoteRepo;
  let main: string;
  let feature: string;
  const caches: string[] = [];
  const cacheDir = async () => {
    caches.push(await tempDir('branch-cache'));
    return caches.at(-1) as string;
  };

  beforeAll(async () => {
    remote = await startRemoteRepo({ 'a.txt': 'main' });
    main = await git(remote.work.dir, 'rev-parse', 'HEAD');
    await git(remote.work.dir, 'checkout', '--quiet', '-b', 'feature/x');
    feature = await remote.work.commit({ 'a.txt': 'feature' });
    await git(remote.work.dir, 'push', '--quiet', 'origin', 'feature/x');
    await git(remote.work.dir, 'checkout', '--quiet', 'main');
  });

  afterAll(async () => {
    await remote?.close();
    for (const dir of caches) await rm(dir, { recursive: true, force: true });
  });

  const sorted = (branches: { branch: string; commit: string }[]) =>
    [...branches].sort((a, b) => a.branch.localeCompare(b.branch));

  it('lists the branches of a repository on this machine', async () => {
    const reader = new LocalRepositoryReader({ path: remote.work.dir, branch: 'main' });
    expect(sorted(await reader.listBranches())).toEqual([
      { branch: 'feature/x', commit: feature },
      { branch: 'main', commit: main },
    ]);
  });

  it('lists the branches of a remote, and fetches a preview commit by its branch', async () => {
    const reader = new RemoteRepositoryReader({
      url: remote.url,
      branch: 'main',
      cacheDir: await cacheDir(),
      http: guardedGitHttp(new OutboundPolicy(['127.0.0.1/32'])),
    });
    expect(sorted(await reader.listBranches())).toEqual([
      { branch: 'feature/x', commit: feature },
      { branch: 'main', commit: main },
    ]);
    await reader.snapshot(main);
    const snapshot = await reader.snapshot(feature, 'feature/x');
    expect(new TextDecoder().decode(await snapshot.readFile('a.txt'))).toBe('feature');
    // Without the branch, a commit only another branch has is not the source's.
    const other = new RemoteRepositoryReader({
      url: remote.url,
      branch: 'main',
      cacheDir: await cacheDir(),
      http: guardedGitHttp(new OutboundPolicy(['127.0.0.1/32'])),
    });
    await expect(other.snapshot(feature)).rejects.toThrow(/no longer the head of "main"/);
    await reader.close();
    await other.close();
  });
});
