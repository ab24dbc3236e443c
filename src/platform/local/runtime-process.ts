import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import { Client, request } from 'undici';
import type { LaunchSpec, ProcessLauncher } from '../../core/interfaces.js';

export interface RuntimeCommand {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** How the sandbox runs it (see LaunchSpec); only used with a launcher. */
  sandbox?: Pick<LaunchSpec, 'tenant' | 'readable' | 'writable' | 'memoryMb' | 'maxProcesses'>;
}

/** The launch of a runtime command with this environment: no network, only its sandbox's paths. */
export function launchSpecOf(
  command: RuntimeCommand,
  env: Record<string, string>,
  stdio: LaunchSpec['stdio'],
): LaunchSpec {
  const sandbox = command.sandbox;
  return {
    command: command.command,
    args: command.args,
    cwd: command.cwd,
    env,
    stdio,
    tenant: sandbox?.tenant ?? 'default',
    readable: sandbox?.readable ?? [],
    writable: sandbox?.writable ?? [],
    network: 'none',
    ...(sandbox?.memoryMb === undefined ? {} : { memoryMb: sandbox.memoryMb }),
    ...(sandbox?.maxProcesses === undefined ? {} : { maxProcesses: sandbox.maxProcesses }),
  };
}

/** A TCP port on loopback, or a unix socket (a sandboxed function has no reachable port). */
export type Endpoint = { port: number } | { socketPath: string };

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
  readonly endpoint: Endpoint;
  readonly origin: string;
  private child: ChildProcess | undefined;
  private output = '';
  private exited = false;
  private readonly logger: Logger;
  private readonly spec: RuntimeCommand;
  private readonly sink: OutputSink | undefined;
  private readonly launcher: ProcessLauncher | undefined;
  /** Health checks over the unix socket. */
  private healthClient: Client | undefined;

  constructor(
    spec: RuntimeCommand,
    endpoint: number | Endpoint,
    logger: Logger,
    sink?: OutputSink,
    launcher?: ProcessLauncher,
  ) {
    super();
    this.spec = spec;
    this.sink = sink;
    this.endpoint = typeof endpoint === 'number' ? { port: endpoint } : endpoint;
    this.origin = 'port' in this.endpoint ? `http://127.0.0.1:${this.endpoint.port}` : 'http://localhost';
    this.logger = logger;
    this.launcher = launcher;
  }

  get socketPath(): string | undefined {
    return 'socketPath' in this.endpoint ? this.endpoint.socketPath : undefined;
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
    const env: Record<string, string> = {
      ...this.spec.env,
      ...('port' in this.endpoint
        ? { PORT: String(this.endpoint.port), SLESS_HOST: '127.0.0.1' }
        : { SLESS_SOCKET: this.endpoint.socketPath }),
      SLESS_LIFELINE: 'stdin',
    };
    // stdin stays open and unused: when this process dies, even by SIGKILL, the runtime sees EOF and
    // exits instead of lingering as an orphan.
    const child = this.launcher
      ? this.launcher.launch(launchSpecOf(this.spec, env, ['pipe', 'pipe', 'pipe']))
      : spawn(this.spec.command, this.spec.args, {
          cwd: this.spec.cwd,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
        });
    if (this.socketPath) this.healthClient = new Client(this.origin, { socketPath: this.socketPath });
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
    } finally {
      void this.healthClient?.close();
      this.healthClient = undefined;
    }
  }

  private async pollHealth(deadline: number): Promise<void> {
    let delay = 2;
    while (!this.exited) {
      if (Date.now() > deadline)
        throw new Error(
          `runtime did not answer /healthz within the start timeout: ${this.logTail().trim().split('\n').slice(-5).join(' | ')}`,
        );
      // A runtime creates its socket once it listens. Until then a request could only fail, and each
      // failed attempt costs this process far more than a stat, which matters while a start-up
      // boots every restored function at once.
      if (this.socketPath && !existsSync(this.socketPath)) {
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      try {
        const response = await request(`${this.origin}/healthz`, {
          headersTimeout: 1000,
          bodyTimeout: 1000,
          ...(this.healthClient ? { dispatcher: this.healthClient } : {}),
        });
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
