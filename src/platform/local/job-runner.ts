/**
 * Local mode's FunctionJobs: each run is one runtime process in one-shot mode, which handles a
 * single event and exits, its result read from its output. Runs are keyed by job and run id, so
 * asking twice for the same run waits on the same process instead of starting another.
 */
import type { Logger } from 'pino';
import { timeoutSecOf } from '../../core/defaults.js';
import type { JobOutcome, JobRunner, ProcessLauncher } from '../../core/interfaces.js';
import type { BuildRecord, FunctionJob, SlessFunction } from '../../core/resources.js';
import { launchSpecOf, type RuntimeCommand } from './runtime-process.js';

const RESULT_PREFIX = 'SLESS_RESULT ';
const TAIL_BYTES = 4096;

/**
 * Runs a FunctionJob as the runtime in one-shot mode (SLESS_EVENT): one process, one invocation, its
 * result on the last stdout line. Runs are keyed by (job, runId), so asking twice attaches.
 */
export class LocalJobRunner implements JobRunner {
  private readonly running = new Map<string, Promise<JobOutcome>>();
  private readonly commandFor: (fn: SlessFunction, build: BuildRecord) => RuntimeCommand;
  private readonly logger: Logger;
  private readonly launcher: ProcessLauncher;

  constructor(options: {
    commandFor: (fn: SlessFunction, build: BuildRecord) => RuntimeCommand;
    logger: Logger;
    launcher: ProcessLauncher;
  }) {
    this.commandFor = options.commandFor;
    this.logger = options.logger;
    this.launcher = options.launcher;
  }

  run(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    const key = `${job.metadata.namespace}/${job.metadata.name}#${job.spec.runId ?? 0}`;
    let outcome = this.running.get(key);
    if (!outcome) {
      outcome = this.start(job, fn, build).finally(() => this.running.delete(key));
      this.running.set(key, outcome);
    }
    return outcome;
  }

  private start(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    const command = this.commandFor(fn, build);
    const startTime = new Date().toISOString();
    const timeoutMs = (timeoutSecOf(fn) + 5) * 1000;
    return new Promise((resolve) => {
      let output = '';
      const child = this.launcher.launch(
        launchSpecOf(command, { ...command.env, SLESS_EVENT: JSON.stringify(job.spec.event ?? {}) }, [
          'ignore',
          'pipe',
          'pipe',
        ]),
      );
      const collect = (chunk: Buffer) => {
        output = (output + chunk.toString('utf8')).slice(-64 * 1024);
      };
      child.stdout?.on('data', collect);
      child.stderr?.on('data', collect);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const finish = (exitCode: number | undefined, message?: string) => {
        clearTimeout(timer);
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
          { job: `${job.metadata.namespace}/${job.metadata.name}`, runId: job.spec.runId, exitCode },
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
              : `run ${job.spec.runId} failed with exit code ${exitCode}`),
        });
      };
      child.once('error', (error) => finish(undefined, `cannot start the runtime: ${error.message}`));
      child.once('close', (code, signal) =>
        finish(code ?? undefined, signal ? `killed by ${signal} (timeout ${timeoutMs} ms)` : undefined),
      );
    });
  }
}
