/**
 * Local mode's FunctionJobs: each run is one runtime process in one-shot mode, which handles a
 * single event and exits, its result read from its output. Runs are keyed by job and run id, so
 * asking twice for the same run waits on the same process instead of starting another. A run sees
 * the function's secret files at their mountPath as a serving process does; they are removed when
 * the run ends, however it ends.
 */
import type { ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { timeoutSecOf } from '../../core/defaults.js';
import type { JobOutcome, JobRunner, ProcessLauncher } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { BuildRecord, FunctionJob, SlessFunction } from '../../core/resources.js';
import { launchSpecOf, type RuntimeCommand } from './runtime-process.js';
import { SecretFiles, type SecretSource } from './secret-files.js';

const RESULT_PREFIX = 'SLESS_RESULT ';
const TAIL_BYTES = 4096;
/** How much of a handler's error a failed run's message repeats (the whole of it is in `result`). */
const REASON_CHARS = 200;

/**
 * `: {error}` when the one-shot runtime answered with an error body (what the handler threw), so the
 * status message says why a run failed, not only its exit code.
 */
function reasonOf(result: unknown): string {
  const body = (result as { body?: unknown } | undefined)?.body;
  const error = (body as { error?: unknown } | undefined)?.error;
  if (typeof error !== 'string' || error.trim() === '') return '';
  const line = error.trim().split('\n')[0] ?? '';
  return `: ${line.length > REASON_CHARS ? `${line.slice(0, REASON_CHARS)}…` : line}`;
}
/** The run is still Running in status: the controller starts it again when sless starts. */
const STOPPING = 'sless is stopping: the run starts again when sless starts';

/**
 * Runs a FunctionJob as the runtime in one-shot mode (SLESS_EVENT): one process, one invocation, its
 * result on the last stdout line. Runs are keyed by (job, runId), so asking twice attaches.
 */
export class LocalJobRunner implements JobRunner {
  private readonly running = new Map<string, Promise<JobOutcome>>();
  private readonly commandFor: (fn: SlessFunction, build: BuildRecord) => RuntimeCommand;
  private readonly logger: Logger;
  private readonly launcher: ProcessLauncher;
  /** The store serving processes read their secrets from, so a run and a request read the same. */
  private readonly secrets: SecretSource;
  /** Each run's secret files, in memory where the machine has /dev/shm, never in the state dir. */
  private readonly secretFiles = new SecretFiles();
  /** The processes of runs under way, for stop(). */
  private readonly children = new Set<ChildProcess>();
  private stopping = false;

  constructor(options: {
    commandFor: (fn: SlessFunction, build: BuildRecord) => RuntimeCommand;
    logger: Logger;
    launcher: ProcessLauncher;
    secrets: SecretSource;
  }) {
    this.commandFor = options.commandFor;
    this.logger = options.logger;
    this.launcher = options.launcher;
    this.secrets = options.secrets;
  }

  run(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    const key = `${objectKey(job.metadata.namespace, job.metadata.name)}#${job.spec.runId ?? 0}`;
    let outcome = this.running.get(key);
    if (!outcome) {
      outcome = this.start(job, fn, build).finally(() => this.running.delete(key));
      this.running.set(key, outcome);
    }
    return outcome;
  }

  /**
   * Kills the runs under way (sless is stopping; the controller attaches again after a start) and
   * removes every secret directory left.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const child of this.children) child.kill('SIGKILL');
    await Promise.allSettled([...this.running.values()]);
    await this.secretFiles.removeAll();
  }

  /** Only stop() and the run's own timeout kill a run, so a signal is one of the two. */
  private killedBy(signal: NodeJS.Signals, timeoutMs: number): string {
    return this.stopping
      ? `killed by ${signal}: sless stopped`
      : `killed by ${signal} (timeout ${timeoutMs} ms)`;
  }

  /**
   * A secret that is missing rejects here, naming it (as for a `secretRef` variable): the job
   * reconciler records a rejected run as Failed with its message.
   */
  private async start(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    if (this.stopping) throw new Error(STOPPING);
    const command = this.commandFor(fn, build);
    const files = await this.secretFiles.prepare(fn, this.secrets, this.launcher);
    if (files)
      command.sandbox = {
        tenant: fn.metadata.namespace,
        readable: [],
        writable: [],
        ...command.sandbox,
        mounts: files.mounts,
      };
    const removeFiles = files ? () => this.secretFiles.remove(files.dir) : () => Promise.resolve();
    let child: ChildProcess;
    try {
      // A stop that came while the files were written must not leave a run it cannot see.
      if (this.stopping) throw new Error(STOPPING);
      child = this.launcher.launch(
        launchSpecOf(command, { ...command.env, SLESS_EVENT: JSON.stringify(job.spec.event ?? {}) }, [
          'ignore',
          'pipe',
          'pipe',
        ]),
      );
    } catch (error) {
      await removeFiles();
      throw error;
    }
    this.children.add(child);
    const startTime = new Date().toISOString();
    const timeoutMs = (timeoutSecOf(fn) + 5) * 1000;
    return new Promise((resolve) => {
      let output = '';
      let finished = false;
      const collect = (chunk: Buffer) => {
        output = (output + chunk.toString('utf8')).slice(-64 * 1024);
      };
      child.stdout?.on('data', collect);
      child.stderr?.on('data', collect);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const finish = async (exitCode: number | undefined, message?: string) => {
        // A spawn error may be followed by a close: the first one tells.
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        this.children.delete(child);
        // Gone before the outcome is told: a finished run leaves no secret behind.
        await removeFiles();
        const resultLine = output
          .split('\n')
          .reverse()
          .find((line) => line.startsWith(RESULT_PREFIX));
        let result: unknown;
        if (resultLine) {
          try {
            result = JSON.parse(resultLine.slice(RESULT_PREFIX.length));
          } catch {
            result = undefined;
          }
        }
        const outputTail = output.slice(-TAIL_BYTES);
        const ok = exitCode === 0;
        this.logger.info(
          { job: objectKey(job.metadata.namespace, job.metadata.name), runId: job.spec.runId, exitCode },
          'job finished',
        );
        resolve({
          phase: ok ? 'Succeeded' : 'Failed',
          startTime,
          completionTime: new Date().toISOString(),
          ...(exitCode === undefined ? {} : { exitCode }),
          ...(result === undefined ? {} : { result }),
          outputTail,
          message:
            message ??
            (ok
              ? `run ${job.spec.runId} succeeded`
              : `run ${job.spec.runId} failed with exit code ${exitCode}${reasonOf(result)}`),
        });
      };
      child.once('error', (error) => void finish(undefined, `cannot start the runtime: ${error.message}`));
      child.once(
        'close',
        (code, signal) =>
          void finish(code ?? undefined, signal ? this.killedBy(signal, timeoutMs) : undefined),
      );
    });
  }
}
