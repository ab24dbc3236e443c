/**
 * Paths from repositories never escape: a symlink that points out of the function's directory fails
 * the build with the file named, and the previous revision keeps serving.
 */
import { symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('symlinks in function code', () => {
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'f/function.yaml': functionManifest('f'),
      'f/data/greeting.txt': 'hello from a linked file',
      'f/handler.js': nodeHandler(
        `return require('node:fs').readFileSync(__dirname + '/greeting.txt', 'utf8');`,
      ),
    });
    await symlink('data/greeting.txt', join(repo.dir, 'f/greeting.txt'));
    await git(repo.dir, 'add', '--all');
    await git(repo.dir, 'commit', '--quiet', '-m', 'link inside');
    system = await startTestSystem({ url: repo.dir });
    await eventually(async () => (await system.functionStatus('f'))?.phase === 'Ready', 30_000, 'f ready');
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('keeps a link that stays inside the function', async () => {
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"hello from a linked file"');
  });

  it('refuses a link out of the function directory and keeps serving the last good build', async () => {
    await symlink('../../../../../../etc/passwd', join(repo.dir, 'f/passwd'));
    await git(repo.dir, 'add', '--all');
    await git(repo.dir, 'commit', '--quiet', '-m', 'link out');
    const status = await eventually(
      async () => {
        const s = await system.functionStatus('f');
        return s?.lastBuild?.result === 'Failed' ? s : undefined;
      },
      20_000,
      'build refused',
    );
    expect(status.lastBuild?.message).toBe(
      'f/passwd: symlink to "../../../../../../etc/passwd" points outside the function\'s directory',
    );
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"hello from a linked file"');
  });
});
