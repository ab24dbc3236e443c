/**
 * A GitSource behind smart HTTP, served by the real `git http-backend`: cheap polls, shallow fetches
 * on a new head, force-pushes and a deleted branch.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('remote git source over smart HTTP', () => {
  let work: TestRepo;
  let root: string;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: TestSystem;

  const push = async (...args: string[]) => git(work.dir, 'push', '--quiet', ...args, 'origin', 'main');
  const sync = async () => {
    const response = await system.call('/v1/namespaces/default/sources/test/sync', { method: 'POST' });
    return (await response.json()) as { outcome: string; commit?: string; message?: string };
  };

  beforeAll(async () => {
    root = await tempDir('git-root');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    server = await startGitHttpServer(root);
    work = await TestRepo.create({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'first';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await push();
    system = await startTestSystem({ url: `${server.url}/fns.git` });
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"first"',
      30_000,
      'first deploy',
    );
  });

  afterAll(async () => {
    await system?.close();
    await server?.close();
    await work?.remove();
  });

  it('polls by listing refs only when nothing changed', async () => {
    const before = server.requests.length;
    const result = await sync();
    expect(result.outcome).toBe('synced'); // a forced sync re-applies, but needs no objects
    const unchanged = await system.controller.syncNow('default', 'test');
    expect(unchanged?.outcome).toBe('unchanged');
    const during = server.requests.slice(before);
    expect(during.length).toBeGreaterThan(0);
    expect(during.filter((r) => r.wantsObjects)).toEqual([]);
  });

  it('fetches a new head and deploys it', async () => {
    await work.commit({ 'hello/handler.js': nodeHandler(`return 'second';`) });
    await push();
    const before = server.requests.length;
    const result = await sync();
    expect(result.outcome).toBe('synced');
    expect(server.requests.slice(before).some((r) => r.wantsObjects)).toBe(true);
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"second"',
      20_000,
      'second deploy',
    );
  });

  it('follows a force-push that rewrote history', async () => {
    await git(work.dir, 'checkout', '--quiet', '--orphan', 'rewritten');
    await work.commit({ 'hello/handler.js': nodeHandler(`return 'rewritten';`) }, 'rewritten history');
    await git(work.dir, 'branch', '--quiet', '-M', 'main');
    await push('--force');
    const result = await sync();
    expect(result.outcome).toBe('synced');
    expect(result.commit).toBe(await git(work.dir, 'rev-parse', 'HEAD'));
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"rewritten"',
      20_000,
      'rewritten deploy',
    );
  });

  it('reports a deleted branch in status and keeps serving', async () => {
    await git(join(root, 'fns.git'), 'update-ref', '-d', 'refs/heads/main');
    const result = await sync();
    expect(result.outcome).toBe('failed');
    const status = await system.sourceStatus();
    const ready = status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.status).toBe('False');
    expect(ready?.reason).toBe('BranchNotFound');
    expect(ready?.message).toContain('branch "main" not found');
    expect((await bodyOf(system, '/fn/default/hello')).text).toBe('"rewritten"');
    // The branch comes back: the source recovers on the next sync.
    await push('--force');
    expect((await sync()).outcome).toBe('synced');
  });

  it('a manual sync of a source that cannot open answers the failure and its reason', async () => {
    const registered = await system.call('/v1/namespaces/default/sources', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'locked',
        spec: { url: `${server.url}/fns.git`, branch: 'main', secretRef: { name: 'absent-creds' } },
      }),
    });
    expect(registered.status).toBe(201);
    const response = await system.call('/v1/namespaces/default/sources/locked/sync', { method: 'POST' });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      outcome: string;
      reason?: string;
      message?: string;
      source: {
        status?: { phase?: string; conditions?: Array<{ type: string; status: string; reason: string }> };
      };
    };
    expect({ outcome: body.outcome, reason: body.reason, message: body.message }).toEqual({
      outcome: 'failed',
      reason: 'SecretNotFound',
      message: 'secretRef "absent-creds": no such secret in default',
    });
    expect(body.source.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'SecretNotFound',
    });
    expect(body.source.status?.phase).toBe('Failed');
    await system.call('/v1/namespaces/default/sources/locked', { method: 'DELETE' });
  });
});
