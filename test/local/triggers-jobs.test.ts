/**
 * Cron triggers and FunctionJobs on the local platform, with real runtime processes: croner fires
 * the function through its route; a job runs the runtime in one-shot mode. What every platform does
 * with them (runs once per runId, runId 0 Skipped, a missing function Failed, a disabled trigger
 * answering 503) is the platform contract's (test/platform/); this file keeps the local scheduler
 * and the run's answer, which only a one-shot runtime process here reports.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

function triggerManifest(spec: Record<string, unknown>): string {
  return `---\napiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: tick\nspec: ${JSON.stringify({ type: 'cron', function: 'worker', ...spec })}\n`;
}

function jobManifest(runId: number, fn = 'worker'): string {
  return `---\napiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: once\nspec: ${JSON.stringify({ function: fn, event: { task: 'report' }, runId })}\n`;
}

describe('cron triggers and function jobs (local)', () => {
  let repo: TestRepo;
  let system: TestSystem;
  let runLog: string;

  const manifests = (trigger: Record<string, unknown>, runId: number) =>
    functionManifest('worker', { env: { RUN_LOG: runLog } }) + triggerManifest(trigger) + jobManifest(runId);
  const job = async () => await system.store.get('FunctionJob', 'default', 'once');
  const trigger = async () => await system.store.get('Trigger', 'default', 'tick');
  const runs = async () => (await readFile(runLog, 'utf8').catch(() => '')).split('\n').filter(Boolean);

  beforeAll(async () => {
    runLog = join(await tempDir('runlog'), 'runs.txt');
    repo = await TestRepo.create({
      'worker/function.yaml': manifests({ schedule: '0 0 1 1 *' }, 1),
      'worker/handler.js': nodeHandler(`
        require('node:fs').appendFileSync(process.env.RUN_LOG, JSON.stringify({ via: event.headers['x-sless-trigger'] ? 'cron' : process.env.SLESS_EVENT ? 'job' : 'http', body: event.body }) + '\\n');
        return { handled: event.body };
      `),
    });
    // The handler records each run in a file of the test's; only an unsandboxed function can write it
    // (test/security covers sandboxed jobs).
    system = await startTestSystem({ url: repo.dir, sandbox: 'off' });
    await eventually(
      async () => (await system.functionStatus('worker'))?.phase === 'Ready',
      30_000,
      'worker ready',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  // Local only: the one-shot runtime process answers, so status has its exit code and result; a kube
  // run Job reports only that it completed.
  it('a FunctionJob run in one-shot mode puts its exit code and result in status', async () => {
    const done = await eventually(
      async () => {
        const j = await job();
        return j?.status?.phase === 'Succeeded' ? j : undefined;
      },
      20_000,
      'job succeeded',
    );
    expect(done.status?.observedRunId).toBe(1);
    expect(done.status?.exitCode).toBe(0);
    expect(done.status?.result).toEqual({ statusCode: 200, body: { handled: { task: 'report' } } });
    expect((await runs()).filter((r) => r.includes('"job"'))).toHaveLength(1);
  });

  // Local only: the in-process scheduler fires through the function's route (kube makes a CronJob).
  it('fires a cron trigger through the function route and records last and next run', async () => {
    await repo.commit({
      'worker/function.yaml': manifests({ schedule: '* * * * * *', event: { from: 'cron' } }, 0),
    });
    const fired = await eventually(
      async () => {
        const t = await trigger();
        return t?.status?.lastRun ? t : undefined;
      },
      10_000,
      'cron fired',
    );
    expect(fired.status?.lastResult).toMatch(/^200 /);
    expect(Date.parse(fired.status?.nextRun ?? '')).toBeGreaterThan(Date.parse(fired.status?.lastRun ?? ''));
    expect((await runs()).some((r) => r.includes('"cron"') && r.includes('"from":"cron"'))).toBe(true);
  });

  // Local only: the in-process schedule stops while disabled (kube suspends the CronJob). The Disabled
  // phase and the 503 are the contract's ('cron-disabled', 'disabled-answer').
  it('disables the function and its schedule with enabled: false, and brings both back', async () => {
    // A witness: another function whose every-second trigger keeps firing. Two of its runs after
    // the worker was disabled prove the scheduler ticked in between; only then is "no worker run" checked.
    const witness =
      `${functionManifest('clock', { env: { RUN_LOG: runLog } })}---\napiVersion: sless.dev/v1alpha1\nkind: Trigger\n` +
      `metadata:\n  name: clock-tick\nspec: ${JSON.stringify({ type: 'cron', function: 'clock', schedule: '* * * * * *', event: { from: 'clock' } })}\n`;
    await repo.commit({
      'worker/function.yaml': manifests(
        { schedule: '* * * * * *', event: { from: 'cron' }, enabled: false },
        0,
      ),
      'clock/function.yaml': witness,
      'clock/handler.js': await readFile(join(repo.dir, 'worker/handler.js'), 'utf8'),
    });
    await eventually(
      async () => (await system.functionStatus('worker'))?.phase === 'Disabled',
      20_000,
      'disabled',
    );
    const workerRuns = async () => (await runs()).filter((r) => r.includes('"from":"cron"')).length;
    const clockRuns = async () => (await runs()).filter((r) => r.includes('"from":"clock"')).length;
    const before = await workerRuns();
    const lastRun = (await trigger())?.status?.lastRun;
    const clockBefore = await clockRuns();
    await eventually(async () => (await clockRuns()) >= clockBefore + 2, 20_000, 'the witness fired twice');
    // Neither the function ran nor did its trigger fire (a fire would have met a 503 and left lastRun).
    expect(await workerRuns()).toBe(before);
    expect((await trigger())?.status?.lastRun).toBe(lastRun);

    await repo.commit({
      'worker/function.yaml': manifests(
        { schedule: '* * * * * *', event: { from: 'cron' }, enabled: true },
        0,
      ),
      'clock/function.yaml': null,
      'clock/handler.js': null,
    });
    await eventually(
      async () => (await bodyOf(system, '/fn/default/worker')).status === 200,
      20_000,
      'enabled again',
    );
    await eventually(async () => (await workerRuns()) > before, 10_000, 'cron running again');
  });
});

// A run's outcome outlives the controller that saw it: after a restart the FunctionJob's Failed is
// read back from the state directory and is final for its runId, as kube's run Job is by its name.
describe('a failed FunctionJob run across a restart (local)', () => {
  it('is not run again for its runId after a restart; the next runId runs once', async () => {
    const runLog = join(await tempDir('runlog'), 'runs.txt');
    const stateDir = await tempDir('job-restart-state');
    const doomed = (runId: number, fail: boolean) =>
      `---\napiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: doomed\nspec: ${JSON.stringify({ function: 'flaky', event: { n: runId, fail }, runId })}\n`;
    const repo = await TestRepo.create({
      'flaky/function.yaml': functionManifest('flaky', { env: { RUN_LOG: runLog } }) + doomed(1, true),
      'flaky/handler.js': nodeHandler(`
        if (process.env.SLESS_EVENT) require('node:fs').appendFileSync(process.env.RUN_LOG, JSON.stringify(event.body) + '\\n');
        if (process.env.SLESS_EVENT && event.body.fail) throw new Error('asked to fail');
        return { ok: true };
      `),
    });
    const runs = async () => (await readFile(runLog, 'utf8').catch(() => '')).split('\n').filter(Boolean);
    const jobPhase = async (system: TestSystem, runId: number) => {
      const status = (await system.store.get('FunctionJob', 'default', 'doomed'))?.status;
      return status?.observedRunId === runId ? status.phase : undefined;
    };
    let system = await startTestSystem({ url: repo.dir, sandbox: 'off', stateDir });
    try {
      await eventually(async () => (await jobPhase(system, 1)) === 'Failed', 30_000, 'run 1 failed');
      expect(await runs()).toEqual(['{"n":1,"fail":true}']);
      await system.close();
      system = await startTestSystem({ url: repo.dir, sandbox: 'off', stateDir });
      await eventually(
        async () => (await system.functionStatus('flaky'))?.phase === 'Ready',
        30_000,
        'flaky ready after the restart',
      );
      // Everything the restart queued was reconciled; run 1 is still the Failed one it was.
      await system.controller.idle();
      expect(await jobPhase(system, 1)).toBe('Failed');
      await repo.commit({
        'flaky/function.yaml': functionManifest('flaky', { env: { RUN_LOG: runLog } }) + doomed(2, false),
      });
      await system.controller.syncNow('default', 'test');
      await eventually(async () => (await jobPhase(system, 2)) === 'Succeeded', 30_000, 'run 2 succeeded');
      expect(await runs()).toEqual(['{"n":1,"fail":true}', '{"n":2,"fail":false}']);
    } finally {
      await system.close();
      await repo.remove();
    }
  });
});
