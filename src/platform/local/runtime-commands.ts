/**
 * How a build runs on this machine: the command, arguments, environment and sandbox limits of each
 * runtime's server, for serving revisions and one-shot FunctionJobs alike, and the plain words status
 * uses for what holds a function in.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { memoryMbOf, timeoutSecOf } from '../../core/defaults.js';
import type { ProcessLauncher } from '../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { RUNTIME_INFO } from '../../core/runtimes.js';
import type { RuntimeCommand } from './runtime-process.js';
import { type SecretSource, secretEnv } from './secret-files.js';
import { resolveToolchain, toolchainRoot } from './toolchains.js';

/** Threads count too (Python serves each request on one): room for a busy server, not a fork bomb. */
export const FUNCTION_MAX_PROCESSES = 256;

const HOST_ENV = /^(PATH|HOME|LANG|LC_\w+|TMPDIR|TZ|SYSTEMROOT)$/;

export function hostEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env))
    if (value !== undefined && HOST_ENV.test(key)) env[key] = value;
  return env;
}

export interface RuntimeCommandOptions {
  runtimesDir: string;
  launcher: ProcessLauncher;
  /** Host-level variables a runtime needs to run at all (PATH, HOME, locale); never secrets. */
  baseEnv?: Record<string, string>;
  /** Values for `secretRef` variables, read at each start so a rotation reaches the next process. */
  secrets?: SecretSource;
}

export class RuntimeCommands {
  private readonly options: RuntimeCommandOptions;

  constructor(options: RuntimeCommandOptions) {
    this.options = options;
  }

  /** What holds this function in, said plainly in its status. */
  isolationOf(fn: SlessFunction): string {
    const report = this.options.launcher.report;
    const holds = (what: string) =>
      report.enforced.some((line) => line.startsWith(`${what}:`)) ? 'enforced' : 'NOT enforced';
    return [
      report.sandboxed ? 'sandboxed (bubblewrap, own uid, no network)' : 'NOT sandboxed',
      `memory ${memoryMbOf(fn)} MiB ${holds('memory')}`,
      `processes <= ${FUNCTION_MAX_PROCESSES} ${holds('processes')}`,
    ].join('; ');
  }

  /** How a build of this function runs here; FunctionJobs use it too, in one-shot mode. */
  commandFor(fn: SlessFunction, build: BuildRecord): RuntimeCommand {
    const buildDir = build.image ?? '';
    const codeDir = join(buildDir, 'code');
    // Its own build (read-only) and the runtime servers are all of sless's files it can see.
    const sandbox = {
      tenant: fn.metadata.namespace,
      readable: [buildDir, this.options.runtimesDir],
      writable: [],
      memoryMb: memoryMbOf(fn),
      maxProcesses: FUNCTION_MAX_PROCESSES,
    };
    const env: Record<string, string> = {
      ...(this.options.baseEnv ?? hostEnv()),
      ...sortedEnv(fn.spec.env),
      // Read at each start: a process started after a rotation gets the new value.
      ...secretEnv(fn, this.options.secrets),
      SLESS_ENTRYPOINT: fn.spec.entrypoint,
      SLESS_CODE_DIR: codeDir,
      SLESS_FUNCTION_NAME: fn.metadata.name,
      SLESS_NAMESPACE: fn.metadata.namespace,
      SLESS_TIMEOUT_SEC: String(timeoutSecOf(fn)),
      SLESS_MEMORY_MB: String(memoryMbOf(fn)),
    };
    const toolchain = resolveToolchain(fn.spec.runtime);
    const runtimeDir = join(this.options.runtimesDir, RUNTIME_INFO[fn.spec.runtime].serverDir);
    // A build checks the toolchain first; one removed since is said here, not as a spawn error.
    if (!toolchain.found && RUNTIME_INFO[fn.spec.runtime].family !== 'go') throw new Error(toolchain.reason);
    const interpreter = toolchain.found ? toolchain.command : '';
    // An interpreter kept outside the system's directories must be visible inside the sandbox too.
    const root = toolchainRoot(toolchain);
    if (root) sandbox.readable.push(root);
    switch (RUNTIME_INFO[fn.spec.runtime].family) {
      case 'node':
        return {
          command: interpreter,
          args: [
            `--max-old-space-size=${Math.max(memoryMbOf(fn), 64)}`,
            // The build root holds a typeless package.json that the image does not have; without
            // this, ES module syntax in code with no package.json would warn here and not there.
            ...(existsSync(join(codeDir, 'package.json'))
              ? []
              : ['--disable-warning=MODULE_TYPELESS_PACKAGE_JSON']),
            join(runtimeDir, 'server.js'),
          ],
          cwd: codeDir,
          env,
          sandbox,
        };
      case 'python':
        return {
          command: interpreter,
          // -S as in the image: only the standard library, the code and its installed requirements
          // are importable, never packages that happen to be installed on this host.
          args: ['-S', join(runtimeDir, 'server.py')],
          cwd: codeDir,
          env: {
            ...env,
            PYTHONPATH: join(buildDir, 'deps'),
            PYTHONDONTWRITEBYTECODE: '1',
            PYTHONUNBUFFERED: '1',
          },
          sandbox,
        };
      case 'go':
        return { command: join(buildDir, 'bin', 'function'), args: [], cwd: codeDir, env, sandbox };
    }
  }
}

/** The plain variables; secret references are resolved by secretEnv. */
function sortedEnv(env: Record<string, unknown> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env ?? {})
      .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}
