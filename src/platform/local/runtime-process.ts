/**
 * The life of one runtime server process: launching it with its environment and sandbox, telling
 * when it is ready (its `/healthz` answers), collecting its output for the logs and for status, and
 * stopping it. Its stdin is a lifeline, so a runtime never outlives sless.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import type { Logger } from 'pino';
import type { LaunchSpec, ProcessLauncher } from '../../core/interfaces.js';
import { startupMark } from '../../core/startup-marks.js';

export interface RuntimeCommand {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** How the sandbox runs it (see LaunchSpec); only used with a launcher. */
  sandbox?: Pick<LaunchSpec, 'tenant' | 'readable' | 'writable' | 'mounts' | 'memoryMb' | 'maxProcesses'>;
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
    ...(sandbox?.mounts ? { mounts: sandbox.mounts } : {}),
    network: 'none',
    ...(sandbox?.memoryMb === undefined ? {} : { memoryMb: sandbox.memoryMb }),
    ...(sandbox?.maxProcesses === undefined ? {} : { maxProcesses: sandbox.maxProcesses }),
  };
}

/** A TCP port on loopback, or a unix socket (a sandboxed function has no reachable port). */
export type Endpoint = { port: number } | { socketPath: string };

const LOG_TAIL_BYTES = 8 * 1024;

/**
 * The status of one `GET /healthz`. node:http, not undici: a restart spawns its runtimes before it
 * loads undici (and the rest of the proxy), and checks their health meanwhile.
 */
function healthz(endpoint: Endpoint): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...('port' in endpoint
          ? { host: '127.0.0.1', port: endpoint.port }
          : { socketPath: endpoint.socketPath }),
        path: '/healthz',
        agent: false,
        timeout: 1000,
      },
      (res) => {
        res.on('error', reject);
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.resume();
      },
    );
    req.on('timeout', () => req.destroy(new Error('/healthz timed out')));
    req.on('error', reject);
    req.end();
  });
}

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
    const subject = `${this.spec.env.SLESS_NAMESPACE}/${this.spec.env.SLESS_FUNCTION_NAME}`;
    startupMark('spawn', subject);
    // stdin stays open and unused: when this process dies, even by SIGKILL, the runtime sees EOF and
    // exits instead of lingering as an orphan.
    const child = this.launcher
      ? this.launcher.launch(launchSpecOf(this.spec, env, ['pipe', 'pipe', 'pipe']))
      : spawn(this.spec.command, this.spec.args, {
          cwd: this.spec.cwd,
          env,
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
      await Promise.race([exitedEarly, this.pollHealth(deadline, subject)]);
      startupMark('healthy', subject);
    } catch (error) {
      await this.stop(0);
      throw error;
    }
  }

  private async pollHealth(deadline: number, subject: string): Promise<void> {
    let delay = 2;
    let socketSeen = false;
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
      if (!socketSeen) startupMark('socket', subject);
      socketSeen = true;
      try {
        if ((await healthz(this.endpoint)) === 200) return;
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
