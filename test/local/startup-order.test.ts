/**
 * A restart serves what served before the control plane loads: the real `sless dev` is started,
 * killed (-9) and started again on the same state directory, and writes the time stamp of each
 * start-up phase (SLESS_STARTUP_MARKS) in the order they happen.
 */
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { SlessProcess } from '../helpers/sless-process.js';

describe('start-up order after a restart', { timeout: 4 * 60_000 }, () => {
  let sless: SlessProcess | undefined;
  let repo: TestRepo | undefined;
  let stateDir: string | undefined;

  afterEach(async () => {
    await sless?.stop('SIGKILL');
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('spawns every restored runtime before the proxy loads, and routes them before the control plane loads', async () => {
    repo = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha'),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
      'beta/function.yaml': functionManifest('beta'),
      'beta/handler.js': nodeHandler(`return 'beta';`),
    });
    stateDir = await tempDir('startup-order');
    const port = await freePort();
    const serves = async (name: string) => (await sless?.call(`/fn/default/${name}`))?.status === 200;
    sless = await SlessProcess.start({ repo: repo.dir, stateDir, port });
    await eventually(async () => (await serves('alpha')) && (await serves('beta')), 60_000, 'first start');
    await sless.stop('SIGKILL');

    const marksFile = join(stateDir, 'startup-marks.jsonl');
    sless = await SlessProcess.start({
      repo: repo.dir,
      stateDir,
      port,
      env: { SLESS_STARTUP_MARKS: marksFile },
    });
    expect(await serves('alpha')).toBe(true);
    expect(await serves('beta')).toBe(true);
    await sless.settled();
    const marks = (await readFile(marksFile, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const { phase, subject } = JSON.parse(line) as { phase: string; subject?: string };
        return subject ? `${phase} ${subject}` : phase;
      });
    const at = (mark: string) => {
      const index = marks.indexOf(mark);
      expect(index, `${mark} in ${marks.join(', ')}`).toBeGreaterThanOrEqual(0);
      return index;
    };
    for (const name of ['default/alpha', 'default/beta']) {
      expect(at(`spawn ${name}`)).toBeLessThan(at('serving path loaded'));
      expect(at(`spawn ${name}`)).toBeLessThan(at(`healthy ${name}`));
      expect(at(`routed ${name}`)).toBeLessThan(at('control plane loading'));
    }
    expect(at('restored')).toBeLessThan(at('control plane loading'));
    expect(at('control plane loaded')).toBeLessThan(at('ready'));
    // Nothing was rolled out again: the restored revisions are what serves.
    expect(marks.filter((m) => m.startsWith('spawn '))).toHaveLength(2);
  });
});
