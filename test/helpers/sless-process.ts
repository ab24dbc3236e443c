/**
 * `sless dev` as a user runs it: a real child process (through tsx, as `npm start` does), killed with
 * real signals. Its JSON log lines are kept across the process's life for the tests to count builds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import { eventually } from './local-system.js';

export interface LogLine {
  msg?: string;
  level?: number;
  function?: string;
  buildKey?: string;
  [field: string]: unknown;
}

export class SlessProcess {
  readonly url: string;
  readonly logs: LogLine[] = [];
  /** Plain (non-JSON) stdout lines: the banner `sless dev` prints once its first sync has settled. */
  readonly printed: string[] = [];
  private errors = '';
  private readonly child: ChildProcess;
  private readonly exited: Promise<[number | null, NodeJS.Signals | null]>;

  private constructor(child: ChildProcess, port: number) {
    this.child = child;
    this.url = `http://127.0.0.1:${port}`;
    this.exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    if (child.stdout)
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (!line.startsWith('{')) {
          this.printed.push(line);
          return;
        }
        try {
          this.logs.push(JSON.parse(line) as LogLine);
        } catch {
          // The banner and other plain lines are not logs.
        }
      });
    child.stderr?.on('data', (chunk: Buffer) => {
      this.errors = (this.errors + chunk.toString('utf8')).slice(-8192);
      if (process.env.SLESS_TEST_LOG) process.stderr.write(chunk);
    });
  }

  /** Spawns `sless dev`; resolves once its API answers /healthz. */
  static async start(options: {
    repo: string;
    stateDir: string;
    port: number;
    interval?: string;
    env?: NodeJS.ProcessEnv;
  }): Promise<SlessProcess> {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(PACKAGE_ROOT, 'src/cli/index.ts'),
        'dev',
        '--repo',
        options.repo,
        '--port',
        String(options.port),
        '--state-dir',
        options.stateDir,
        '--interval',
        options.interval ?? '1s',
        '--json',
      ],
      {
        cwd: PACKAGE_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        // The test git server is on loopback, which the outbound policy refuses unless allowed.
        env: {
          ...process.env,
          SLESS_LOG_LEVEL: 'info',
          SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
          ...options.env,
        },
      },
    );
    const sless = new SlessProcess(child, options.port);
    await sless.listening();
    return sless;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async listening(): Promise<void> {
    const deadline = Date.now() + 120_000;
    for (;;) {
      // An exit (a config error, a crash) fails at once, with what the process said.
      if (!this.alive)
        throw new Error(
          `sless exited (${this.child.exitCode ?? this.child.signalCode}): ${this.errors.trim().slice(-2000)}`,
        );
      const ok = await fetch(`${this.url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      if (Date.now() > deadline) throw new Error('sless did not answer /healthz within 120 s');
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Resolves once the first sync and every reconcile it caused have finished (the banner is out). */
  async settled(): Promise<void> {
    await eventually(
      async () => this.printed.some((l) => l.startsWith('sless is serving on')),
      60_000,
      'first sync settled',
    );
  }

  call(path: string, init?: RequestInit): Promise<Response> {
    return fetch(`${this.url}${path}`, init);
  }

  async json<T>(path: string): Promise<T> {
    return (await (await this.call(path)).json()) as T;
  }

  /** What a failing test prints: the last log lines and stderr of the process. */
  tail(count = 80): string {
    const lines = this.logs.slice(-count).map((line) => JSON.stringify(line));
    return `${lines.join('\n')}\n--- stderr ---\n${this.errors}`;
  }

  /** Log lines with this message, optionally for one function (`ns/name`). */
  lines(msg: string, fn?: string): LogLine[] {
    return this.logs.filter((l) => l.msg === msg && (fn === undefined || l.function === fn));
  }

  /** Sends the signal and waits for the process to be gone. */
  async stop(signal: NodeJS.Signals): Promise<[number | null, NodeJS.Signals | null]> {
    if (this.alive) this.child.kill(signal);
    return this.exited;
  }
}
