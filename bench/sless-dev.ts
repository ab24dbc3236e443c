// `node bin/sless.js dev` on a repository for benchmarks: quotas raised to fit `functions`, idle
// functions parked after 5 minutes, logs at warn.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';

export interface Sless {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

export async function startSlessDev(options: {
  repo: string;
  stateDir: string;
  functions: number;
  /** Options for node itself, before the script (for example --cpu-prof). */
  nodeArgs?: string[];
}): Promise<Sless> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      join(PACKAGE_ROOT, 'bin', 'sless.js'),
      'dev',
      '--repo',
      options.repo,
      '--port',
      String(port),
      '--state-dir',
      options.stateDir,
      '--scale-to-zero-after',
      '5m',
      '--json',
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      // The default quotas (200 functions, 50 processes per namespace) would refuse the repository
      // and fail builds beyond the 50th.
      env: {
        ...process.env,
        SLESS_LOG_LEVEL: 'warn',
        SLESS_QUOTA_FUNCTIONS: String(options.functions + 10),
        SLESS_QUOTA_PROCESSES: String(options.functions + 10),
      },
    },
  );
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
