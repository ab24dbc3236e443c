// The remote reader against `git http-backend`: readers are shared by the sync and by every Function
// reconcile of a source, so they must stand concurrent use of one cache gitdir.
import fs from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import git from 'isomorphic-git';
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

  it('close() resolves only once a fetch in flight has finished writing, and refuses new fetches', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let fetchStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => {
      fetchStarted = resolve;
    });
    // Holds the fetch's upload-pack request, so the fetch is surely in flight when close() is called.
    let holdFetch = false;
    const holding = {
      request: async (request: Parameters<typeof http.request>[0]) => {
        if (holdFetch && request.method === 'POST') {
          fetchStarted();
          await held;
        }
        return http.request(request);
      },
    };
    const cacheDir = await tempDir('reader-cache');
    dirs.push(cacheDir);
    const r = new RemoteRepositoryReader({ url: remote.url, branch: 'main', cacheDir, http: holding });
    const head = await r.resolveHead();
    holdFetch = true;
    const events: string[] = [];
    const snapshot = r.snapshot(head).then(
      () => events.push('fetch done'),
      (error: Error) => events.push(`fetch failed: ${error.message}`),
    );
    await started;
    const closed = r.close().then(async () => {
      // The fetch wrote the commit into the reader's (only) gitdir before close() resolved.
      const [gitdir] = await readdir(cacheDir);
      const written = await git.readCommit({ fs, gitdir: join(cacheDir, gitdir ?? ''), oid: head }).then(
        () => true,
        () => false,
      );
      events.push(written ? 'closed, commit written' : 'closed, commit not written');
    });
    // The positive signal first: the fetch is held, and close() waits for it.
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual([]);
    release();
    await Promise.all([snapshot, closed]);
    expect(events.sort()).toEqual(['closed, commit written', 'fetch done']);
    const next = await remote.push({ 'alpha/after-close.txt': 'x\n' });
    await expect(r.snapshot(next)).rejects.toThrow(/is closed/);
  });

  it('a fresh reader serves the head', async () => {
    const r = await reader();
    const head = await r.resolveHead();
    expect((await r.snapshot(head)).commit).toBe(head);
  });
});
