/**
 * LocalJobRunner's ways for a run to end, with real child processes: its result line read back, a
 * runtime that cannot start, the run's own timeout, a stop() while it runs, and a second ask for
 * the same run attaching to the first process instead of starting another.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { LaunchSpec, ProcessLauncher } from '../../core/interfaces.js';
import type { BuildRecord, FunctionJob, SlessFunction } from '../../core/resources.js';
import { LocalJobRunner } from './job-runner.js';

/** Plain children, counted, so a test can tell how many runs really started. */
class CountingLauncher implements ProcessLauncher {
  readonly report = { sandboxed: false, enforced: [], notEnforced: [] };
  readonly launched: ChildProcess[] = [];
  async grant(): Promise<void> {}
  launch(spec: LaunchSpec): ChildProcess {
    const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: spec.stdio });
    this.launched.push(child);
    return child;
  }
}

const BUILD: BuildRecord = { buildKey: 'k', commit: 'c'.repeat(40), result: 'Succeeded', startedAt: '' };

function fnWith(timeoutSec = 30): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name: 'f', namespace: 'team-a' },
    spec: {
      runtime: 'nodejs20',
      entrypoint: 'handler.handler',
      memoryMb: 128,
      replicas: 1,
      timeoutSec,
    },
  };
}

function job(runId: number): FunctionJob {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'FunctionJob',
    metadata: { name: 'j', namespace: 'team-a' },
    spec: { function: 'f', event: { n: runId }, runId },
  };
}

/** A runtime stand-in: `script` runs under node with SLESS_EVENT as the runtime gets it. */
function runnerFor(script: string, command = process.execPath) {
  const launcher = new CountingLauncher();
  const runner = new LocalJobRunner({
    commandFor: () => ({
      command,
      args: ['-e', script],
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? '' },
    }),
    logger: pino({ level: 'silent' }),
    launcher,
    secrets: { getSync: () => undefined },
  });
  return { runner, launcher };
}

const alive = (child: ChildProcess | undefined) =>
  child !== undefined && child.exitCode === null && child.signalCode === null;

describe('LocalJobRunner', () => {
  const runners: LocalJobRunner[] = [];
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((runner) => runner.stop()));
  });
  const make = (script: string, command?: string) => {
    const made = runnerFor(script, command);
    runners.push(made.runner);
    return made;
  };

  it('reads the result from the last SLESS_RESULT line and its event from SLESS_EVENT', async () => {
    const { runner } = make(
      "const e = JSON.parse(process.env.SLESS_EVENT); console.log('SLESS_RESULT {\"n\":0}'); console.log('noise'); console.log('SLESS_RESULT ' + JSON.stringify({ n: e.n * 2 }));",
    );
    const outcome = await runner.run(job(21), fnWith(), BUILD);
    expect(outcome).toMatchObject({
      phase: 'Succeeded',
      exitCode: 0,
      result: { n: 42 },
      message: 'run 21 succeeded',
    });
  });

  it('fails a run that exits non-zero, with its exit code and output tail', async () => {
    const { runner } = make("console.error('bad input'); process.exit(3)");
    const outcome = await runner.run(job(1), fnWith(), BUILD);
    expect(outcome).toMatchObject({ phase: 'Failed', exitCode: 3, message: 'run 1 failed with exit code 3' });
    expect(outcome.outputTail).toContain('bad input');
  });

  it("names the handler's error in the message of a run that failed with an error result", async () => {
    // As the one-shot runtime answers a handler that threw: a 500 result whose body names the error.
    const long = 'x'.repeat(300);
    const { runner } = make(
      `console.log('SLESS_RESULT ' + JSON.stringify({ statusCode: 500, body: { error: 'no such customer 42\\nat line 3' } })); process.exit(1)`,
    );
    expect(await runner.run(job(5), fnWith(), BUILD)).toMatchObject({
      phase: 'Failed',
      exitCode: 1,
      message: 'run 5 failed with exit code 1: no such customer 42',
    });
    const { runner: longer } = make(
      `console.log('SLESS_RESULT ' + JSON.stringify({ statusCode: 500, body: { error: '${long}' } })); process.exit(1)`,
    );
    expect((await longer.run(job(6), fnWith(), BUILD)).message).toBe(
      `run 6 failed with exit code 1: ${'x'.repeat(200)}…`,
    );
  });

  it('fails a run whose runtime cannot start, saying so', async () => {
    const { runner } = make('', '/nonexistent/sless-runtime');
    const outcome = await runner.run(job(1), fnWith(), BUILD);
    expect(outcome.phase).toBe('Failed');
    expect(outcome.exitCode).toBeUndefined();
    expect(outcome.message).toMatch(/^cannot start the runtime: spawn \/nonexistent\/sless-runtime ENOENT/);
  });

  it('kills a run past timeoutSec plus its grace of 5 s', async () => {
    const { runner, launcher } = make('setInterval(() => {}, 1000)');
    const started = Date.now();
    const outcome = await runner.run(job(1), fnWith(1), BUILD);
    expect(outcome).toMatchObject({ phase: 'Failed', message: 'killed by SIGKILL (timeout 6000 ms)' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(5_900);
    expect(alive(launcher.launched[0])).toBe(false);
  }, 20_000);

  it('attaches a second ask for the same run to the first process, and starts a new run id apart', async () => {
    const { runner, launcher } = make(
      "setTimeout(() => console.log('SLESS_RESULT ' + process.env.SLESS_EVENT), 300)",
    );
    const [first, again] = [runner.run(job(1), fnWith(), BUILD), runner.run(job(1), fnWith(), BUILD)];
    expect(again).toBe(first);
    const other = runner.run(job(2), fnWith(), BUILD);
    expect((await first).result).toEqual({ n: 1 });
    expect((await other).result).toEqual({ n: 2 });
    expect(launcher.launched).toHaveLength(2);
  });

  it('stop() kills a run under way and refuses new ones, so a start runs them again', async () => {
    const { runner, launcher } = make("console.log('started'); setInterval(() => {}, 1000)");
    const running = runner.run(job(1), fnWith(60), BUILD);
    await new Promise<void>((resolve) => {
      const poll = () =>
        launcher.launched[0]?.stdout
          ? launcher.launched[0].stdout.once('data', () => resolve())
          : setTimeout(poll, 10);
      poll();
    });
    await runner.stop();
    expect(await running).toMatchObject({ phase: 'Failed', message: 'killed by SIGKILL: sless stopped' });
    expect(alive(launcher.launched[0])).toBe(false);
    await expect(runner.run(job(2), fnWith(), BUILD)).rejects.toThrow(
      'sless is stopping: the run starts again when sless starts',
    );
    expect(launcher.launched).toHaveLength(1);
  });
});
