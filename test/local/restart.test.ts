/** Builds are durable: a restarted sless serves the same revision without building again. */
import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem } from '../helpers/local-system.js';

describe('restart', () => {
  it('reuses builds cached by build key across restarts', async () => {
    const repo = await TestRepo.create({
      'f/function.yaml': functionManifest('f'),
      'f/package.json': '{ "name": "f", "version": "1.0.0" }\n',
      'f/handler.js': nodeHandler(`return 'built once';`),
    });
    const stateDir = await tempDir('durable');
    const first = await startTestSystem({ url: repo.dir, stateDir });
    await eventually(
      async () => (await bodyOf(first, '/fn/default/f')).text === '"built once"',
      30_000,
      'first start',
    );
    const built = (await first.functionStatus('f'))?.lastBuild;
    await first.close();

    const second = await startTestSystem({ url: repo.dir, stateDir });
    await eventually(
      async () => (await bodyOf(second, '/fn/default/f')).text === '"built once"',
      30_000,
      'second start',
    );
    const reused = (await second.functionStatus('f'))?.lastBuild;
    expect(reused?.buildKey).toBe(built?.buildKey);
    expect(reused?.startedAt).toBe(built?.startedAt);
    expect(await second.buildCount('f')).toBe(1);
    await second.close();
    await rm(stateDir, { recursive: true, force: true });
    await repo.remove();
  });
});
