/**
 * Branch previews on the local platform, against a real git server over smart HTTP, in what the
 * platform contract's 'preview' case (test/platform) does not cover: a branch cut from main, as users
 * cut them; a repository Function whose name only looks like a preview's; two branches meeting at one
 * label, an error naming both; and a deleted branch taking its processes with it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL_PREVIEW } from '../../src/core/previews.js';
import type { AnyResource } from '../../src/core/resources.js';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('branch previews (local)', { timeout: 240_000 }, () => {
  let remote: RemoteRepo;
  let system: TestSystem;
  const preview = 'f--feature-login';

  const sync = () => system.controller.syncNow('default', 'test', { force: true });
  const pushBranch = async (branch: string, files: Record<string, string>) => {
    await git(remote.work.dir, 'checkout', '--quiet', '-B', branch, 'main');
    await remote.work.commit(files, `on ${branch}`);
    await git(remote.work.dir, 'push', '--quiet', '--force', 'origin', branch);
    const commit = await git(remote.work.dir, 'rev-parse', 'HEAD');
    await git(remote.work.dir, 'checkout', '--quiet', 'main');
    return commit;
  };
  const deleteBranch = (branch: string) =>
    git(remote.work.dir, 'push', '--quiet', 'origin', '--delete', branch);
  const functions = async () =>
    ((await system.store.list('Function', { namespace: 'default' })) as AnyResource[])
      .map((fn) => fn.metadata.name)
      .sort();
  /** What a sync writes of main's Functions (status aside, which their own reconciles write). */
  const versions = async () =>
    Object.fromEntries(
      await Promise.all(
        ['f', 'g'].map(async (name) => {
          const fn = await system.store.get('Function', 'default', name);
          return [name, { metadata: { ...fn?.metadata, resourceVersion: undefined }, spec: fn?.spec }];
        }),
      ),
    );

  beforeAll(async () => {
    remote = await startRemoteRepo({
      'f/function.yaml': functionManifest('f'),
      'f/handler.js': nodeHandler(`return 'main f';`),
      'g/function.yaml': functionManifest('g'),
      'g/handler.js': nodeHandler(`return 'main g';`),
      // A repository Function that merely bears a preview-like name is no preview of g.
      'h/function.yaml': functionManifest('g--demo'),
      'h/handler.js': nodeHandler(`return 'not a preview';`),
    });
    system = await startTestSystem({
      url: remote.url,
      previews: { branches: ['feature/*'], idleSeconds: 2 },
    });
    await eventually(async () => (await bodyOf(system, '/fn/default/g')).text === '"main g"', 60_000, 'g');
    await eventually(
      async () => (await bodyOf(system, '/fn/default/g--demo')).status === 200,
      60_000,
      'g--demo',
    );
    await eventually(async () => (await bodyOf(system, '/fn/default/f')).text === '"main f"', 60_000, 'f');
  });

  afterAll(async () => {
    await system?.close();
    await remote?.close();
  });

  it('previews a branch cut from main: every function, and a preview-like name as itself', async () => {
    const mainBefore = await versions();
    const commit = await pushBranch('feature/Login', { 'f/handler.js': nodeHandler(`return 'branch f';`) });
    await sync();
    await eventually(
      async () => (await bodyOf(system, '/fn/default/f@feature-login')).text === '"branch f"',
      60_000,
      'the preview of f',
    );
    expect(await bodyOf(system, '/fn/default/g@feature-login')).toEqual({ status: 200, text: '"main g"' });
    expect(await versions()).toEqual(mainBefore);
    // The repository's g--demo is previewed as g--demo, not taken for a preview of g.
    expect(await functions()).toEqual([
      'f',
      preview,
      'g',
      'g--demo',
      'g--demo--feature-login',
      'g--feature-login',
    ]);
    expect((await system.sourceStatus())?.previews).toEqual([
      {
        branch: 'feature/Login',
        label: 'feature-login',
        commit,
        urls: [
          '/fn/default/f@feature-login',
          '/fn/default/g@feature-login',
          '/fn/default/g--demo@feature-login',
        ],
      },
    ]);
  });

  it('answers 404 for a preview of a function that does not exist, and for a preview-like name', async () => {
    expect((await system.call('/fn/default/nope@feature-login')).status).toBe(404);
    const lookalike = await system.call('/fn/default/g@demo');
    expect(lookalike.status).toBe(404);
    expect(((await lookalike.json()) as { error: string }).error).toMatch(/has no branch preview "demo"/);
  });

  it('refuses two branches that normalise to one label, naming both, and previews neither', async () => {
    await pushBranch('feature/login', { 'f/handler.js': nodeHandler(`return 'other f';`) });
    await sync();
    const status = await system.sourceStatus();
    expect(status?.previews).toEqual([]);
    expect(status?.previewErrors).toEqual([
      'branches "feature/Login" and "feature/login" all normalise to the preview label "feature-login": none of them is previewed; rename one',
    ]);
    expect(await functions()).toEqual(['f', 'g', 'g--demo']);
    expect((await system.call('/fn/default/f@feature-login')).status).toBe(404);
    await deleteBranch('feature/login');
    await sync();
    await eventually(
      async () => (await bodyOf(system, '/fn/default/f@feature-login')).text === '"branch f"',
      60_000,
      'the preview back',
    );
  });

  it('removes a deleted branch’s objects and processes, and leaves main serving', async () => {
    const pid = system.platform.processId('default', preview);
    expect(pid).toBeDefined();
    const mainBefore = await versions();
    await deleteBranch('feature/Login');
    await sync();
    expect(await functions()).toEqual(['f', 'g', 'g--demo']);
    const labelled = await system.store.list('Function', {
      namespace: 'default',
      labels: { [LABEL_PREVIEW]: 'feature-login' },
    });
    expect(labelled).toEqual([]);
    await eventually(async () => !alive(pid as number), 30_000, 'the preview process gone');
    expect(system.platform.processId('default', preview)).toBeUndefined();
    expect((await system.sourceStatus())?.previews).toEqual([]);
    expect(await versions()).toEqual(mainBefore);
    expect(await bodyOf(system, '/fn/default/f')).toEqual({ status: 200, text: '"main f"' });
  });
});
