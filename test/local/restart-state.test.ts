/**
 * A restart never loses what serves. Each case runs the real `sless dev` as a child process against a
 * repository served over smart HTTP by `git http-backend`, and restarts it with real signals (SIGKILL
 * gives it no chance to save anything; SIGTERM is its own shutdown) on the same state directory.
 */
import { readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Condition } from '../../src/core/conditions.js';
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, git, nodeHandler, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { SlessProcess } from '../helpers/sless-process.js';

const SOURCE = '/v1/namespaces/default/sources/examples';
/** Each case starts `sless dev` two to four times; on a busy two-core machine one start takes seconds. */
const CASE_TIMEOUT = 5 * 60_000;

function handler(fn: string, version: string): string {
  return nodeHandler(`return { fn: '${fn}', version: '${version}' };`);
}

function condition(status: { conditions?: Condition[] } | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

describe('a restart never loses what serves', { timeout: CASE_TIMEOUT }, () => {
  let repo: RemoteRepo | undefined;
  let sless: SlessProcess | undefined;
  let stateDir: string;
  let port: number;

  const start = async () => {
    sless = await SlessProcess.start({ repo: repo?.url ?? '', stateDir, port });
    return sless;
  };
  const restart = async (signal: NodeJS.Signals) => {
    const [code] = (await sless?.stop(signal)) ?? [];
    // SIGTERM is sless's own clean shutdown; SIGKILL gives it none.
    if (signal !== 'SIGKILL') expect(code).toBe(0);
    return start();
  };
  const body = async (name: string) => {
    const response = await sless?.call(`/fn/default/${name}`);
    const json = response?.ok ? ((await response.json()) as { fn: string; version: string }) : undefined;
    return { status: response?.status, json };
  };
  const sourceStatus = async () =>
    (await sless?.json<{ status?: GitSourceStatus }>(SOURCE))?.status as GitSourceStatus;
  const functionStatus = async (name: string) =>
    (await sless?.json<{ status?: FunctionStatus }>(`/v1/namespaces/default/functions/${name}`))
      ?.status as FunctionStatus;

  afterEach(async (context) => {
    if (context.task.result?.state === 'fail' && sless)
      process.stderr.write(`--- last log lines of sless dev ---\n${sless.tail()}\n`);
    await sless?.stop('SIGKILL');
    sless = undefined;
    await repo?.close();
    repo = undefined;
  });

  const setUp = async (files: Record<string, string>) => {
    repo = await startRemoteRepo(files);
    stateDir = await tempDir('restart-state');
    port = await freePort();
    await start();
  };

  it.each([
    {
      kind: 'an invalid field',
      signal: 'SIGKILL',
      change: { 'alpha/function.yaml': functionManifest('alpha', { memoryMb: 999999 }) },
      issue: 'alpha/function.yaml#0 spec.memoryMb: must be <= 4096',
    },
    {
      kind: 'a YAML syntax error',
      signal: 'SIGTERM',
      change: {
        'alpha/function.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: { name: alpha\n',
      },
      issue: 'alpha/function.yaml',
    },
    {
      kind: 'a source.path outside the repository',
      signal: 'SIGKILL',
      change: { 'alpha/function.yaml': functionManifest('alpha', { source: { path: '../..' } }) },
      issue: 'alpha/function.yaml#0 spec.source.path: must stay inside the repository',
    },
  ] as const)(
    'a rejected head ($kind) after $signal: the last accepted commit serves from the first request and the rejection reads as before',
    async ({ signal, change, issue }) => {
      await setUp({
        'alpha/function.yaml': functionManifest('alpha'),
        'alpha/handler.js': handler('alpha', 'a1'),
        'beta/function.yaml': functionManifest('beta'),
        'beta/handler.js': handler('beta', 'b1'),
      });
      const accepted = await git(repo?.work.dir ?? '', 'rev-parse', 'HEAD');
      await eventually(
        async () => (await body('alpha')).status === 200 && (await body('beta')).status === 200,
      );
      const rejected = await repo?.push(change, 'bad');
      const before = await eventually(async () => {
        const s = await sourceStatus();
        return s.lastAttemptedCommit === rejected && condition(s, 'Stalled')?.status === 'True'
          ? s
          : undefined;
      });
      const readyBefore = condition(before, 'Ready');
      expect(readyBefore?.reason).toBe('ValidationFailed');
      expect(readyBefore?.message).toContain(
        `commit ${rejected?.slice(0, 12)} rejected, still serving ${accepted.slice(0, 12)}`,
      );
      expect(readyBefore?.message).toContain(issue);

      await restart(signal);
      // No waiting: the first requests after the API listens are served by the last accepted commit.
      expect(await body('alpha')).toEqual({ status: 200, json: { fn: 'alpha', version: 'a1' } });
      expect(await body('beta')).toEqual({ status: 200, json: { fn: 'beta', version: 'b1' } });
      await sless?.settled();
      const after = await sourceStatus();
      expect(after.lastSyncedCommit).toBe(accepted);
      expect(after.lastAttemptedCommit).toBe(rejected);
      expect(condition(after, 'Ready')).toEqual(readyBefore);
      expect(condition(after, 'Stalled')).toEqual(condition(before, 'Stalled'));
      expect((await functionStatus('alpha')).phase).toBe('Ready');
      // Nothing was rebuilt, and the loop still moves on: a fixed commit is applied.
      expect(sless?.lines('build succeeded')).toEqual([]);
      await repo?.push({
        'alpha/function.yaml': functionManifest('alpha'),
        'alpha/handler.js': handler('alpha', 'a2'),
      });
      await eventually(
        async () => (await body('alpha')).json?.version === 'a2',
        30_000,
        'fixed commit served',
      );
    },
  );

  describe('a function whose newest build fails', () => {
    it('keeps serving its previous revision across kill -9 and SIGTERM when the build is refused (symlink out)', async () => {
      await setUp({
        'f/function.yaml': functionManifest('f'),
        'f/handler.js': handler('f', 'f1'),
      });
      await eventually(async () => (await body('f')).status === 200);
      // It answers before its status says so: what serves is read once status records it.
      const servingBefore = (
        await eventually(async () => {
          const s = await functionStatus('f');
          return s.phase === 'Ready' && s.servingRevision ? s : undefined;
        })
      ).servingRevision;
      await symlink('../../../../../../etc/passwd', join(repo?.work.dir ?? '', 'f/passwd'));
      await repo?.push({ 'f/handler.js': handler('f', 'f2') }, 'link out');
      const before = await eventually(async () => {
        const s = await functionStatus('f');
        return s.lastBuild?.result === 'Failed' ? s : undefined;
      });
      expect(before.lastBuild?.message).toBe(
        'f/passwd: symlink to "../../../../../../etc/passwd" points outside the function\'s directory',
      );
      for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
        await restart(signal);
        expect(await body('f')).toEqual({ status: 200, json: { fn: 'f', version: 'f1' } });
        await sless?.settled();
        const after = await functionStatus('f');
        expect(after.servingRevision).toBe(servingBefore);
        expect(after.phase).toBe('Failed');
        expect(after.lastBuild).toEqual(before.lastBuild);
        expect(condition(after, 'Ready')?.message).toBe(condition(before, 'Ready')?.message);
        expect(condition(after, 'Ready')?.message).toContain(`still serving ${servingBefore}`);
      }
    });

    it('is not tried again after a restart; a rebuild request or new code tries again', async () => {
      await setUp({
        'g/function.yaml': functionManifest('g'),
        'g/handler.js': handler('g', 'g1'),
      });
      await eventually(async () => (await body('g')).status === 200);
      // Broken JSON: npm fails at once, a real dependency-install failure.
      await repo?.push({ 'g/package.json': '{ "name": "g", ', 'g/handler.js': handler('g', 'g2') });
      const failed = await eventually(async () => {
        const s = await functionStatus('g');
        return s.lastBuild?.result === 'Failed' ? s : undefined;
      });
      const key = failed.buildKey;
      const attempts = () =>
        sless?.lines('build failed', 'default/g').filter((l) => l.buildKey === key) ?? [];
      expect(attempts()).toHaveLength(1);
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        await restart(signal);
        await sless?.settled();
        expect((await functionStatus('g')).lastBuild).toEqual(failed.lastBuild);
        expect(attempts()).toEqual([]);
        expect(await body('g')).toEqual({ status: 200, json: { fn: 'g', version: 'g1' } });
      }
      // A rebuild request clears the verdict: the build runs (and fails) once more.
      const rebuild = await sless?.call('/v1/namespaces/default/functions/g/rebuild', { method: 'POST' });
      expect(rebuild?.status).toBe(202);
      await eventually(async () => attempts().length === 1, 30_000, 'rebuild attempted');
      // New code has a new build key, with no verdict against it.
      await repo?.push({ 'g/package.json': null });
      await eventually(async () => (await body('g')).json?.version === 'g2', 30_000, 'fixed code served');
    });
  });

  it('removes the staging directory of a build that kill -9 cut short, and builds it exactly once', async () => {
    await setUp({
      'slow/function.yaml': functionManifest('slow'),
      'slow/handler.js': handler('slow', 's1'),
      // A real, slow dependency install: npm runs the package's own install script.
      'slow/package.json': JSON.stringify({
        name: 'slow',
        version: '1.0.0',
        scripts: { install: 'node -e "setTimeout(() => {}, 3000)"' },
      }),
    });
    const fnDir = join(stateDir, 'builds', 'default', 'slow');
    const staging = await eventually(
      async () => (await readdir(fnDir).catch(() => [])).find((e) => e.includes('.staging-')),
      30_000,
      'build staging',
    );
    await restart('SIGKILL');
    expect(await readdir(fnDir).catch(() => [])).not.toContain(staging);
    await eventually(async () => (await body('slow')).status === 200, 30_000, 'slow served');
    expect(sless?.lines('build succeeded', 'default/slow')).toHaveLength(1);
    expect((await readdir(fnDir)).filter((e) => e.includes('.staging-'))).toEqual([]);
  });

  it('sets an unreadable or future-version state file aside with a warning, and starts from git', async () => {
    await setUp({ 'h/function.yaml': functionManifest('h'), 'h/handler.js': handler('h', 'h1') });
    await eventually(async () => (await body('h')).status === 200);
    const dir = join(stateDir, 'state');
    const warnings = () =>
      (sless?.logs ?? [])
        .filter((l) => l.level === 40 && /state file|not restored/.test(String(l.msg)))
        .map((l) => `${l.function ?? ''} ${l.msg}`);

    // The store's file is cut short: the revision that served has no Function to belong to, so it is
    // not restored (nothing would ever stop it); the sync from git brings the function back.
    await sless?.stop('SIGTERM');
    await writeFile(join(dir, 'objects.json'), '{"version": 1, "data": {"objects": [tru');
    await start();
    await eventually(async () => (await body('h')).status === 200, 30_000, 'served again from git');
    expect(warnings()).toEqual([
      ` state file ${join(dir, 'objects.json')} is not JSON: Unexpected end of JSON input; moved it aside and started without it`,
      'default/h no Function for the revision that served; not restored',
    ]);

    // The serving file comes from a newer sless.
    await sless?.stop('SIGTERM');
    const serving = JSON.parse(await readFile(join(dir, 'serving.json'), 'utf8')) as { version: number };
    await writeFile(join(dir, 'serving.json'), JSON.stringify({ ...serving, version: 2 }));
    await start();
    await eventually(async () => (await body('h')).status === 200, 30_000, 'served again');
    expect(warnings()).toEqual([
      ` state file ${join(dir, 'serving.json')} has version 2, written by a newer sless (this one reads version 1); moved it aside and started without it`,
    ]);
    const entries = await readdir(dir);
    expect(entries.filter((e) => e.startsWith('objects.json.set-aside-'))).toHaveLength(1);
    expect(entries.filter((e) => e.startsWith('serving.json.set-aside-'))).toHaveLength(1);
  });
});
