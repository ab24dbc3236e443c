/**
 * Paths from repositories never escape: a symlink that points out of the function's directory fails
 * the build with the file named, and the previous revision keeps serving. Out of the function's
 * directory means out of it, not only out of the repository: a link to a sibling directory (another
 * function's files, or a directory whose name merely starts with the function's) is refused too.
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

  /** Commits `files` and symlinks, and waits for f's build of that commit to finish. */
  async function commitAndBuild(files: Record<string, string | null>, links: Record<string, string>) {
    await repo.write(files);
    for (const [path, target] of Object.entries(links)) await symlink(target, join(repo.dir, path));
    await git(repo.dir, 'add', '--all');
    await git(repo.dir, 'commit', '--quiet', '-m', 'links');
    const head = await git(repo.dir, 'rev-parse', 'HEAD');
    return eventually(
      async () => {
        const build = (await system.functionStatus('f'))?.lastBuild;
        return build?.commit === head && build.result !== 'Running' ? build : undefined;
      },
      30_000,
      `f built at ${head}`,
    );
  }

  it("refuses a link that stays in the repository but leaves the function's directory", async () => {
    const build = await commitAndBuild(
      { 'f/passwd': null, 'g/secret.txt': 'g only' },
      { 'f/x': '../g/secret.txt' },
    );
    expect({ result: build.result, message: build.message }).toEqual({
      result: 'Failed',
      message: 'f/x: symlink to "../g/secret.txt" points outside the function\'s directory',
    });
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"hello from a linked file"');
  });

  it('refuses a link into a sibling directory whose name starts with the function directory name', async () => {
    const build = await commitAndBuild(
      { 'f/x': null, 'fg/secret.txt': 'fg only' },
      { 'f/y': '../fg/secret.txt' },
    );
    expect({ result: build.result, message: build.message }).toEqual({
      result: 'Failed',
      message: 'f/y: symlink to "../fg/secret.txt" points outside the function\'s directory',
    });
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"hello from a linked file"');
  });
});
