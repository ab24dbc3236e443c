/**
 * Instant rollback on the local platform, past what the platform contract's 'pinned' case checks
 * on every platform (pinning serves a commit again without a build, holds against new commits, and
 * unpinning serves the head): a pin survives a restart of the embedded system, which keeps it in
 * its state directory, and the API refuses a commit of another branch, a malformed commit and an
 * unknown source, which needs a second branch of the repository the contract does not make.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('instant rollback (local)', () => {
  let repo: TestRepo;
  let stateDir: string;
  let system: TestSystem;
  const commits: string[] = [];

  const served = async (text: string) =>
    eventually(
      async () => (await bodyOf(system, '/fn/default/f')).text === `"${text}"`,
      60_000,
      `"${text}" served`,
    );
  const pin = (commit: string, source = 'test') =>
    system.call(`/v1/namespaces/default/sources/${source}/pin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ commit }),
    });

  beforeAll(async () => {
    repo = await TestRepo.create({
      'f/function.yaml': functionManifest('f'),
      'f/handler.js': nodeHandler(`return 'one';`),
    });
    commits.push(await git(repo.dir, 'rev-parse', 'HEAD'));
    stateDir = await tempDir('rollback-state');
    system = await startTestSystem({ url: repo.dir, stateDir });
    await served('one');
    commits.push(await repo.commit({ 'f/handler.js': nodeHandler(`return 'two';`) }));
    await system.controller.syncNow('default', 'test');
    await served('two');
    expect((await pin(commits[0] as string)).status).toBe(200);
    await served('one');
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('refuses a commit of another branch, a malformed one and an unknown source, and stays pinned', async () => {
    await git(repo.dir, 'checkout', '--quiet', '-b', 'elsewhere');
    const other = await repo.commit({ 'f/handler.js': nodeHandler(`return 'other';`) });
    await git(repo.dir, 'checkout', '--quiet', 'main');
    const refused = await pin(other);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: `commit: ${other} is not a commit of branch "main" of GitSource test`,
    });
    const malformed = await pin('HEAD~1');
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: string }).error).toMatch(/^body\/commit|commit/);
    expect((await pin(commits[1] as string, 'nope')).status).toBe(404);
    // Nothing moved: still pinned to the first commit.
    expect((await system.sourceStatus())?.pinnedCommit).toBe(commits[0]);
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"one"');
  });

  it('the pin survives a restart, and serves without a build', async () => {
    await system.close();
    system = await startTestSystem({ url: repo.dir, stateDir });
    await system.controller.syncNow('default', 'test');
    await served('one');
    expect((await system.sourceStatus())?.pinnedCommit).toBe(commits[0]);
    expect(await system.buildCount('f')).toBe(2);
  });
});
