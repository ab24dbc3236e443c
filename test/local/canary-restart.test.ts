/**
 * A canary survives kill -9 of sless: the real `sless dev` as a child process, killed mid-step with
 * SIGKILL and started again on the same state directory. After the restart the old revision serves
 * alone until the canary is set up again (never a half-configured split), the canary resumes at the
 * step it was in, and it is promoted to every request as it would have been.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, nodeHandler, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { SlessProcess } from '../helpers/sless-process.js';

const STEPS = [20, 60];

describe('a canary across kill -9 (local)', { timeout: 5 * 60_000 }, () => {
  let repo: RemoteRepo | undefined;
  let sless: SlessProcess | undefined;

  afterEach(async (context) => {
    if (context.task.result?.state === 'fail' && sless)
      process.stderr.write(`--- last log lines of sless dev ---\n${sless.tail()}\n`);
    await sless?.stop('SIGKILL');
    sless = undefined;
    await repo?.close();
    repo = undefined;
  });

  const status = async () =>
    (await sless?.json<{ status?: FunctionStatus }>('/v1/namespaces/default/functions/c'))
      ?.status as FunctionStatus;
  /** What `count` requests answered, by body ("v1", "v2") or status code. */
  const answers = async (count: number) => {
    const seen = new Map<string, number>();
    for (let i = 0; i < count; i++) {
      const response = await sless?.call('/fn/default/c');
      const text = response?.ok ? await response.text() : String(response?.status);
      seen.set(text, (seen.get(text) ?? 0) + 1);
    }
    return seen;
  };

  it('resumes the step it was in and promotes, with only the old revision serving until then', async () => {
    repo = await startRemoteRepo({
      'c/function.yaml': functionManifest('c', {
        rollout: { canary: { steps: STEPS, stepSeconds: 8, maxErrorRate: 0.05 } },
      }),
      'c/handler.js': nodeHandler(`return 'v1';`),
    });
    const stateDir = await tempDir('canary-restart');
    const port = await freePort();
    sless = await SlessProcess.start({ repo: repo.url, stateDir, port });
    await eventually(async () => (await status())?.phase === 'Ready', 120_000, 'v1 ready');
    const stable = (await status()).servingRevision;
    await repo.push({ 'c/handler.js': nodeHandler(`return 'v2';`) });
    const before = await eventually(
      async () => {
        const canary = (await status())?.canary;
        return canary?.phase === 'Progressing' && canary.figures !== undefined && canary;
      },
      120_000,
      'canary in its first step',
    );
    expect(before.weight).toBe(STEPS[0]);
    const split = await answers(100);
    expect(split.get('"v2"')).toBe(STEPS[0]);
    expect(split.get('"v1"')).toBe(100 - (STEPS[0] as number));

    await sless.stop('SIGKILL');
    sless = await SlessProcess.start({ repo: repo.url, stateDir, port });
    // Whatever answers between the restart and the canary's new start is one of the two revisions,
    // and never an error.
    const observed: unknown[] = [];
    const resumed = await eventually(
      async () => {
        const seen = await answers(20);
        for (const answer of seen.keys()) expect(['"v1"', '"v2"']).toContain(answer);
        const canary = (await status())?.canary;
        if (JSON.stringify(observed.at(-1)) !== JSON.stringify(canary)) observed.push(canary);
        return canary?.phase === 'Progressing' && canary.message?.startsWith('resumed') && canary;
      },
      120_000,
      'canary resumed',
    ).catch((error: Error) => {
      throw new Error(`${error.message}; canary status seen: ${JSON.stringify(observed)}`);
    });
    expect(resumed.revision).toBe(before.revision);
    expect(resumed.stableRevision).toBe(stable);
    expect(resumed.weight).toBe(STEPS[resumed.step]);
    expect((await status()).servingRevision).toBe(stable);
    // Set up again as it was: the step's exact share.
    if (resumed.step === 0) {
      const again = await answers(100);
      expect(again.get('"v2"')).toBe(STEPS[0]);
    }
    const done = await eventually(
      async () => {
        const s = await status();
        return s.canary?.phase === 'Promoted' && s.phase === 'Ready' && s;
      },
      120_000,
      'promoted after the restart',
    );
    expect(done.servingRevision).toBe(before.revision);
    expect(await answers(50)).toEqual(new Map([['"v2"', 50]]));
  });
});
