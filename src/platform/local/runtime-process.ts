import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { request } from 'undici';

export interface RuntimeCommand {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

const LOG_TAIL_BYTES = 8 * 1024;

/** Where a process's output goes besides the log: the function log buffer, per stream. */
export type OutputSink = (stream: 'stdout' | 'stderr') => { write(text: string): void; end(): void };

/**
 * One runtime server process. It is ready once `/healthz` answers 200; if it exits before that,
 * start() rejects with the tail of its output, which is what ends up in function status.
 */
export class RuntimeProcess extends EventEmitter<{
  exit: [code: number | null, signal: NodeJS.Signals | null];
}> {
  readonly port: number;
  readonly origin: string;
  private child: ChildProcess | undefined;
  private output = '';
  private exited = false;
  private readonly logger: Logger;
  private readonly spec: RuntimeCommand;
  private readonly sink: OutputSink | undefined;

  constructor(spec: RuntimeCommand, port: number, logger: Logger, sink?: OutputSink) {
    super();
    this.spec = spec;
    this.sink = sink;
    this.port = port;
    this.origin = `http://127.0.0.1:${port}`;
    this.logger = logger;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get alive(): boolean {
    return this.child !== undefined && !this.exited;
  }

  logTail(): string {
    return this.output.slice(-LOG_TAIL_BYTES);
  }

  async start(timeoutMs: number): Promise<void> {
    const child = spawn(this.spec.command, this.spec.args, {
      cwd: this.spec.cwd,
      env: { ...this.spec.env, PORT: String(this.port), SLESS_HOST: '127.0.0.1', SLESS_LIFELINE: 'stdin' },
      // stdin stays open and unused: when this process dies, even by SIGKILL, the runtime sees EOF and
      // exits instead of lingering as an orphan.
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin?.on('error', () => undefined);
    this.child = child;
    const capture = (stream: 'stdout' | 'stderr') => {
      const sink = this.sink?.(stream);
      child[stream]?.on('end', () => sink?.end());
      // setEncoding below: chunks are strings, never split inside a multi-byte character.
      return (chunk: string) => {
        const text = chunk;
        this.output = (this.output + text).slice(-LOG_TAIL_BYTES * 2);
        sink?.write(text);
        for (const line of text.split('\n')) if (line) this.logger.info({ stream }, line);
      };
    };
    child.stdout?.setEncoding('utf8');
    child.stderr?.setEncoding('utf8');
    child.stdout?.on('data', capture('stdout'));
    child.stderr?.on('data', capture('stderr'));
    const exitedEarly = new Promise<never>((_, reject) => {
      child.once('error', (error) => {
        this.exited = true;
        reject(new Error(`cannot start ${this.spec.command}: ${error.message}`));
      });
      child.once('exit', (code, signal) => {
        this.exited = true;
        this.emit('exit', code, signal);
        reject(
          new Error(
            `runtime exited (${signal ?? `code ${code}`}) before it was healthy: ${this.logTail().trim().split('\n').slice(-5).join(' | ')}`,
          ),
        );
      });
    });
    exitedEarly.catch(() => undefined);
    const deadline = Date.now() + timeoutMs;
    try {
      await Promise.race([exitedEarly, this.pollHealth(deadline)]);
    } catch (error) {
      await this.stop(0);
      throw error;
    }
  }

  private async pollHealth(deadline: number): Promise<void> {
    let delay = 2;
    while (!this.exited) {
      if (Date.now() > deadline)
        throw new Error(
          `runtime did not answer /healthz within the start timeout: ${this.logTail().trim().split('\n').slice(-5).join(' | ')}`,
        );
      try {
        const response = await request(`${this.origin}/healthz`, { headersTimeout: 1000, bodyTimeout: 1000 });
        await response.body.dump();
        if (response.statusCode === 200) return;
      } catch {
        // Not listening yet.
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 20);
    }
  }

  /** SIGTERM, then SIGKILL after the grace period. Resolves once the process is gone. */
  stop(graceMs = 2000): Promise<void> {
    const child = this.child;
    if (!child || this.exited || child.exitCode !== null || child.signalCode !== null)
      return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
    });
  }
}
