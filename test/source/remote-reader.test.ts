// The remote reader against `git http-backend`: readers are shared by the sync and by every Function
// reconcile of a source, so they must stand concurrent use of one cache gitdir.
import { rm } from 'node:fs/promises';
import http from 'isomorphic-git/http/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteRepositoryReader } from '../../src/source/readers.js';
import { tempDir } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';

describe('RemoteRepositoryReader', () => {
  let remote: RemoteRepo;
  const dirs: string[] = [];

  beforeAll(async () => {
    remote = await startRemoteRepo({ 'alpha/handler.js': 'export default () => 1\n' });
  });
  afterAll(async () => {
    await remote?.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  const reader = async () => {
    const cacheDir = await tempDir('reader-cache');
    dirs.push(cacheDir);
    return new RemoteRepositoryReader({ url: remote.url, branch: 'main', cacheDir, http });
  };

  it('concurrent snapshots of new commits on one reader all succeed, with one fetch per commit', async () => {
    const fetches: string[] = [];
    const counting = {
      request: (request: Parameters<typeof http.request>[0]) => {
        if (request.method === 'POST') fetches.push(request.url);
        return http.request(request);
      },
    };
    const cacheDir = await tempDir('reader-cache');
    dirs.push(cacheDir);
    const shared = new RemoteRepositoryReader({ url: remote.url, branch: 'main', cacheDir, http: counting });
    for (let round = 1; round <= 5; round++) {
      const commit = await remote.push({ [`alpha/v${round}.txt`]: `${round}\n` });
      const head = await shared.resolveHead();
      expect(head).toBe(commit);
      const before = fetches.length;
      const snapshots = await Promise.all(Array.from({ length: 8 }, () => shared.snapshot(head)));
      for (const snapshot of snapshots) expect(snapshot.commit).toBe(commit);
      // One upload-pack request fetched the commit; the other seven found it there.
      expect(fetches.slice(before)).toEqual([`${remote.url}/git-upload-pack`]);
    }
  });

  it('a fresh reader serves the head', async () => {
    const r = await reader();
    const head = await r.resolveHead();
    expect((await r.snapshot(head)).commit).toBe(head);
  });
});
