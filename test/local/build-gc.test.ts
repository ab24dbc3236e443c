/**
 * Build history on the local platform: the real `sless dev` as a child process, a repository served by
 * `git http-backend`, real build directories under a real state directory, restarts with real signals.
 * What must hold: past `SLESS_BUILD_HISTORY` only the newest builds stay, plus the one that serves or
 * is pinned; a deleted function's builds go; a build cut short by kill -9 leaves nothing behind.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, git, nodeHandler, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { SlessProcess } from '../helpers/sless-process.js';

const SOURCE = '/v1/namespaces/default/sources/examples';

function handler(fn: string, version: string): string {
  return nodeHandler(`return { fn: '${fn}', version: '${version}' };`);
}

describe('build history on the local platform', { timeout: 6 * 60_000 }, () => {
  let repo: RemoteRepo | undefined;
  let sless: SlessProcess | undefined;
  let stateDir: string;
  let port: number;

  afterEach(async () => {
    await sless?.stop('SIGKILL');
    sless = undefined;
    await repo?.close();
    repo = undefined;
  });

  const start = async (history: number) => {
    sless = await SlessProcess.start({
      repo: repo?.url ?? '',
      stateDir,
      port,
      env: { SLESS_BUILD_HISTORY: String(history) },
    });
  };
  /** Build directories of a function: one per build key, staging directories apart. */
  const builds = async (fn: string) => {
    const entries = await readdir(join(stateDir, 'builds', 'default', fn)).catch(() => [] as string[]);
    return {
      done: entries.filter((e) => !e.includes('.staging-')).sort(),
      staging: entries.filter((e) => e.includes('.staging-')),
    };
  };
  const version = async (fn: string) => {
    const response = await sless?.call(`/fn/default/${fn}`);
    return response?.ok ? ((await response.json()) as { version: string }).version : response?.status;
  };
  const buildKey = async (fn: string) =>
    (await sless?.json<{ status?: FunctionStatus }>(`/v1/namespaces/default/functions/${fn}`))?.status
      ?.buildKey ?? '';
  /** Pushes a new version of `a` and waits until it serves; returns its commit and build key. */
  const release = async (v: string) => {
    const commit = (await repo?.push({ 'a/handler.js': handler('a', v) }, v)) ?? '';
    await eventually(async () => (await version('a')) === v, 60_000, `a ${v} served`);
    return { commit, key: await buildKey('a') };
  };

  it('keeps the newest builds plus the pinned one, and drops a pin-kept build once unpinned', async () => {
    repo = await startRemoteRepo({
      'a/function.yaml': functionManifest('a'),
      'a/handler.js': handler('a', 'v1'),
    });
    stateDir = await tempDir('build-gc');
    port = await freePort();
    await start(3);
    await eventually(async () => (await version('a')) === 'v1', 60_000, 'a v1 served');
    const v1 = { commit: await git(repo.work.dir, 'rev-parse', 'HEAD'), key: await buildKey('a') };
    const v2 = await release('v2');
    const v3 = await release('v3');
    const v4 = await release('v4');
    // Four builds, limit 3: the oldest goes, with a log line that names it.
    await eventually(async () => (await builds('a')).done.length === 3, 30_000, 'history trimmed to 3');
    expect((await builds('a')).done).toEqual([v2.key, v3.key, v4.key].sort());
    // The log line is written after the directory goes, and reaches this process through a pipe that
    // lags under load: wait for it rather than expect it at once.
    const pruned = await eventually(
      async () => {
        const lines = sless?.lines('pruned builds past the history limit', 'default/a') ?? [];
        return lines.length > 0 ? lines : undefined;
      },
      10_000,
      'the pruned log line',
    );
    expect(pruned.flatMap((l) => l.pruned as string[])).toEqual([
      join(stateDir, 'builds', 'default', 'a', v1.key),
    ]);

    // Roll back to v2 (its build exists: nothing is rebuilt), then restart with a smaller limit: the
    // newest build and the pinned one stay, the one in between goes.
    const pin = await sless?.call(`${SOURCE}/pin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ commit: v2.commit }),
    });
    expect(pin?.status).toBeLessThan(300);
    await eventually(async () => (await version('a')) === 'v2', 30_000, 'pinned v2 served');
    await sless?.stop('SIGTERM');
    await start(1);
    await eventually(async () => (await builds('a')).done.length === 2, 30_000, 'history trimmed to 1 + pin');
    expect((await builds('a')).done).toEqual([v2.key, v4.key].sort());
    expect(await version('a')).toBe('v2');
    expect(sless?.lines('build succeeded', 'default/a')).toEqual([]);

    // Unpinned, the head serves again and v2 is just an old build past the limit.
    const unpin = await sless?.call(`${SOURCE}/pin`, { method: 'DELETE' });
    expect(unpin?.status).toBeLessThan(300);
    await eventually(async () => (await version('a')) === 'v4', 30_000, 'head v4 served again');
    await eventually(async () => (await builds('a')).done.length === 1, 30_000, 'pin-kept build pruned');
    expect((await builds('a')).done).toEqual([v4.key]);
    expect(await version('a')).toBe('v4');
  });

  it('removes a deleted function’s builds, and the staging a kill -9 left, even when the function went meanwhile', async () => {
    repo = await startRemoteRepo({
      'keep/function.yaml': functionManifest('keep'),
      'keep/handler.js': handler('keep', 'k1'),
      'gone/function.yaml': functionManifest('gone'),
      'gone/handler.js': handler('gone', 'g1'),
    });
    stateDir = await tempDir('build-gc');
    port = await freePort();
    await start(5);
    await eventually(
      async () => (await version('keep')) === 'k1' && (await version('gone')) === 'g1',
      60_000,
      'both served',
    );
    expect((await builds('gone')).done).toHaveLength(1);

    // A function deleted from the repository takes its build history with it.
    await repo.push({ 'gone/function.yaml': null, 'gone/handler.js': null }, 'delete gone');
    await eventually(async () => (await version('gone')) === 404, 30_000, 'gone no longer routed');
    await eventually(
      async () =>
        (await readdir(join(stateDir, 'builds', 'default')).catch(() => [] as string[])).includes('gone') ===
        false,
      30_000,
      "gone's build directory removed",
    );
    expect((await builds('keep')).done).toHaveLength(1);

    // A slow build cut short by kill -9, of a function deleted before sless comes back: the next start
    // leaves no trace of it.
    await repo.push({
      'slow/function.yaml': functionManifest('slow'),
      'slow/handler.js': handler('slow', 's1'),
      'slow/package.json': JSON.stringify({
        name: 'slow',
        version: '1.0.0',
        scripts: { install: 'node -e "setTimeout(() => {}, 60000)"' },
      }),
    });
    await eventually(async () => (await builds('slow')).staging.length === 1, 60_000, 'slow build staging');
    await sless?.stop('SIGKILL');
    expect((await builds('slow')).staging).toHaveLength(1);
    await repo.push({ 'slow/function.yaml': null, 'slow/handler.js': null, 'slow/package.json': null });
    await start(5);
    expect(await readdir(join(stateDir, 'builds', 'default'))).toEqual(['keep']);
    expect(sless?.lines('removed staging directories of interrupted builds')).toHaveLength(1);
    expect(await version('keep')).toBe('k1');
  });
});
