/**
 * A URL per commit on the local platform: `/fn/{ns}/{name}@{sha}` calls the kept build made at that
 * commit (full or 12-digit SHA), started on demand and stopped when idle; the build history lists
 * these URLs; garbage collection keeps a build while its commit URL runs, and once the build is
 * collected the URL answers 404 with a clear message.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('a URL per commit (local)', { timeout: 180_000 }, () => {
  let repo: TestRepo;
  let system: TestSystem;
  const commits: string[] = [];
  const manifest = functionManifest('f', { scaleToZero: { idleSeconds: 2 } });

  const served = (text: string) =>
    eventually(async () => (await bodyOf(system, '/fn/default/f')).text === `"${text}"`, 60_000, text);
  const release = async (body: string) => {
    commits.push(await repo.commit({ 'f/handler.js': nodeHandler(`return '${body}';`) }));
    await system.controller.syncNow('default', 'test');
    await served(body);
  };
  const history = async () =>
    (await system.call('/v1/namespaces/default/functions/f/builds').then((r) => r.json())) as {
      items: { commit: string; image?: string; url?: string; result: string }[];
    };

  beforeAll(async () => {
    repo = await TestRepo.create({
      'f/function.yaml': manifest,
      'f/handler.js': nodeHandler(`return 'one';`),
    });
    commits.push(await git(repo.dir, 'rev-parse', 'HEAD'));
    // Two builds kept past the one serving: the third commit makes the first one garbage.
    system = await startTestSystem({ url: repo.dir, env: { SLESS_BUILD_HISTORY: '2' } });
    await served('one');
    await release('two');
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('serves an older commit by its 12-digit and its full SHA, and the serving one without a second process', async () => {
    const [one, two] = commits as [string, string];
    expect(await bodyOf(system, `/fn/default/f@${one.slice(0, 12)}`)).toEqual({ status: 200, text: '"one"' });
    expect(await bodyOf(system, `/fn/default/f@${one}`)).toEqual({ status: 200, text: '"one"' });
    expect(system.platform.commitRevisions('default', 'f')).toEqual([one]);
    // The head's build is the serving revision: no process of its own.
    expect(await bodyOf(system, `/fn/default/f@${two.slice(0, 12)}`)).toEqual({ status: 200, text: '"two"' });
    expect(system.platform.commitRevisions('default', 'f')).toEqual([one]);
    // The plain path still serves the head.
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"two"');
  });

  it('lists the commit URLs in the build history', async () => {
    const { items } = await history();
    const urls = items.filter((b) => b.result === 'Succeeded').map((b) => new URL(b.url ?? '').pathname);
    expect(urls.sort()).toEqual(commits.map((commit) => `/fn/default/f@${commit.slice(0, 12)}`).sort());
  });

  it('keeps a running commit build past the history limit, then collects it once idle: 404 with a clear message', async () => {
    const one = commits[0] as string;
    const dirOfOne = (await history()).items.find((b) => b.commit === one)?.image as string;
    expect(existsSync(dirOfOne)).toBe(true);
    // Kept busy from before the third commit until after the collector looked: every collection the
    // new build asks for (and the one run here) finds it running, and must keep it.
    const answers: string[] = [];
    let busy = true;
    const keepBusy = (async () => {
      while (busy) {
        answers.push((await bodyOf(system, `/fn/default/f@${one.slice(0, 12)}`)).text);
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    await eventually(async () => answers.length > 0, 30_000, 'the commit URL answers');
    await release('three');
    const kept = await system.gc.collect();
    busy = false;
    await keepBusy;
    expect(new Set(answers)).toEqual(new Set(['"one"']));
    expect(kept.pruned.map((b) => b.id)).not.toContain(dirOfOne);
    expect(existsSync(dirOfOne)).toBe(true);
    // Idle for its idleSeconds: stopped, and then it is garbage like any old build.
    await eventually(
      async () => system.platform.commitRevisions('default', 'f').length === 0,
      30_000,
      'idle stop',
    );
    const pass = await system.gc.collect();
    expect(pass.pruned.map((b) => b.id)).toContain(dirOfOne);
    expect(existsSync(dirOfOne)).toBe(false);
    const gone = await system.call(`/fn/default/f@${one.slice(0, 12)}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual({
      error: `function default/f has no kept build at commit ${one.slice(0, 12)}: it was never built there, or its build was removed past the build history limit`,
    });
    // The kept ones still answer.
    expect((await bodyOf(system, `/fn/default/f@${(commits[1] as string).slice(0, 12)}`)).text).toBe('"two"');
    expect((await bodyOf(system, '/fn/default/f')).text).toBe('"three"');
  });

  // Its 503 there is the platform contract's ('commit-url-refused'), as is the 404 of a commit with no build.
  it("a disabled function's commit revisions stop", async () => {
    const trigger = `---\napiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: off\nspec: ${JSON.stringify({ type: 'http', function: 'f', enabled: false })}\n`;
    await repo.commit({ 'f/function.yaml': `${manifest}${trigger}` });
    await system.controller.syncNow('default', 'test');
    await eventually(
      async () => (await system.functionStatus('f'))?.phase === 'Disabled',
      30_000,
      'disabled',
    );
    expect(system.platform.commitRevisions('default', 'f')).toEqual([]);
  });
});
