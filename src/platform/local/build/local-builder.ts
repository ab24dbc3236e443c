/**
 * Local mode's builder: a function's code at one commit plus its installed dependencies, made into
 * a directory keyed by its build key, with the install steps run through the launcher (sandboxed
 * where the machine allows it). It keeps builds crash-safe (a build only appears once complete) and
 * remembers failed ones, so the same code is not built again until someone asks.
 */

import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { asError, BuildError, BuildFailedError } from '../../../core/errors.js';
import type { Builder, BuildRequest, ProcessLauncher } from '../../../core/interfaces.js';
import { objectKey } from '../../../core/object-key.js';
import { ANNOTATION_BUILD_KEY, type BuildRecord, type SlessFunction } from '../../../core/resources.js';
import { RUNTIME_INFO } from '../../../core/runtimes.js';
import type { RuntimeName } from '../../../core/schemas.js';
import { materializeFunction } from '../../../packaging/materialize.js';
import { resolveToolchain, type Toolchain, toolchainRoot } from '../toolchains.js';
import { runCommand, tail } from './run-command.js';

export interface LocalBuilderOptions {
  /** `.sless` state directory; builds live under `{stateDir}/builds/{ns}/{fn}/{buildKey}`. */
  stateDir: string;
  /** Package caches, one directory per namespace (default `{stateDir}/cache`). */
  cacheDir?: string;
  runtimesDir: string;
  logger: Logger;
  /** Runs the install steps: sandboxed where the machine allows it. */
  launcher: ProcessLauncher;
  stepTimeoutMs?: number;
  onBuildFinished?: (record: BuildRecord, fn: SlessFunction) => void;
  /** Failed builds by build key, kept across restarts; without it a failure is forgotten on restart. */
  failedBuilds?: FailedBuildLedger;
}

/** Where failed builds are remembered, so the same code is not built again until someone asks. */
export interface FailedBuildLedger {
  get(fn: SlessFunction, buildKey: string): BuildRecord | undefined;
  set(fn: SlessFunction, buildKey: string, record: BuildRecord): Promise<void>;
  delete(fn: SlessFunction, buildKey: string): Promise<void>;
}

/** Marks a build's staging directory: `{buildDir}.staging-{pid}-{start}`. */
export const STAGING = '.staging-';

interface Step {
  command: string;
  args: string[];
  cwd: string;
  env?: Record<string, string>;
}

/** Variables a dependency install may need; everything else (tokens, keys) stays out of builds. */
const PASSED_ENV =
  /^(PATH|HOME|LANG|LC_\w+|TMPDIR|USER|SHELL|npm_config_\w+|NPM_CONFIG_\w+|PIP_\w+|GO\w*|CGO_\w+|HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy|SSL_CERT_\w+|NODE_EXTRA_CA_CERTS)$/;

/** Each namespace's package caches: shared by its own builds, never by another namespace's. */
function cacheEnv(cacheDir: string): Record<string, string> {
  return {
    GOCACHE: join(cacheDir, 'go-build'),
    GOMODCACHE: join(cacheDir, 'go-mod'),
    GOPATH: join(cacheDir, 'go'),
    npm_config_cache: join(cacheDir, 'npm'),
    PIP_CACHE_DIR: join(cacheDir, 'pip'),
  };
}

/** Unsandboxed (single-user mode), builds share the user's own caches, as the tools would anyway. */
function buildEnv(cacheDir: string, sandboxed: boolean): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env))
    if (value !== undefined && PASSED_ENV.test(key)) env[key] = value;
  return sandboxed ? { ...env, ...cacheEnv(cacheDir) } : env;
}

/** Install steps may download and compile (go build -p 2) but not exhaust the machine. */
export const BUILD_MEMORY_MB = 2048;
export const BUILD_MAX_PROCESSES = 1024;

/**
 * Builds a function into a directory keyed by its build key: the code at that commit plus its
 * installed dependencies. A finished build is renamed into place atomically, so a crash mid-build
 * never leaves a half directory that a restart would trust.
 */
export class LocalBuilder implements Builder {
  private readonly options: LocalBuilderOptions;
  private readonly inFlight = new Map<string, Promise<BuildRecord>>();
  private readonly staging = new Set<string>();
  private readonly grantedCaches = new Set<string>();

  constructor(options: LocalBuilderOptions) {
    this.options = options;
  }

  buildDir(fn: SlessFunction, buildKey: string): string {
    return join(this.options.stateDir, 'builds', fn.metadata.namespace, fn.metadata.name, buildKey);
  }

  async lookup(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    const file = join(this.buildDir(fn, buildKey), 'build.json');
    if (!existsSync(file)) return undefined;
    try {
      const record = JSON.parse(await readFile(file, 'utf8')) as BuildRecord;
      if (record.result !== 'Succeeded') return undefined;
      // Builds made before the boundary existed get it on first use, so they load as in a container.
      await writeModuleBoundary(this.buildDir(fn, buildKey));
      return record;
    } catch {
      return undefined;
    }
  }

  async lookupFailed(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    return this.options.failedBuilds?.get(fn, buildKey);
  }

  async discardFailed(fn: SlessFunction): Promise<void> {
    const buildKey = fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
    if (buildKey) await this.options.failedBuilds?.delete(fn, buildKey);
  }

  /** True while a build of this directory runs (garbage collection leaves it alone). */
  isBuilding(dir: string): boolean {
    return this.inFlight.has(dir);
  }

  /** Staging directories of the builds running now; any other one was left by an interrupted build. */
  activeStaging(): ReadonlySet<string> {
    return this.staging;
  }

  build(request: BuildRequest): Promise<BuildRecord> {
    const dir = this.buildDir(request.fn, request.buildKey);
    const running = this.inFlight.get(dir);
    if (running) return running;
    const promise = this.buildOnce(request, dir).finally(() => this.inFlight.delete(dir));
    this.inFlight.set(dir, promise);
    return promise;
  }

  private async buildOnce(request: BuildRequest, dir: string): Promise<BuildRecord> {
    const existing = await this.lookup(request.fn, request.buildKey);
    if (existing) return existing;
    // This code failed to build before (maybe before a restart): the verdict stands until a rebuild.
    const verdict = this.options.failedBuilds?.get(request.fn, request.buildKey);
    if (verdict) throw new BuildFailedError(verdict);
    const started = Date.now();
    const log = this.options.logger.child({
      function: objectKey(request.fn.metadata.namespace, request.fn.metadata.name),
      buildKey: request.buildKey,
    });
    const staging = `${dir}${STAGING}${process.pid}-${started}`;
    const record: BuildRecord = {
      buildKey: request.buildKey,
      commit: request.commit,
      result: 'Running',
      startedAt: new Date(started).toISOString(),
    };
    let output = '';
    this.staging.add(staging);
    try {
      await rm(staging, { recursive: true, force: true });
      const codeDir = join(staging, 'code');
      const count = await materializeFunction({
        snapshot: request.snapshot,
        codeDir: request.codeDir,
        excludedFiles: request.excludedFiles,
        target: codeDir,
      });
      output += `[sless] wrote ${count} files from ${request.codeDir || '.'} at ${request.commit.slice(0, 12)}\n`;
      await writeModuleBoundary(staging);
      const tenant = request.fn.metadata.namespace;
      const cacheDir = await this.tenantCache(tenant);
      // The install step writes only here and to its namespace's cache; it sees no other build.
      await this.options.launcher.grant(tenant, staging);
      const toolchain = resolveToolchain(request.fn.spec.runtime);
      // Said at build time, in status, rather than as a process that cannot start.
      if (!toolchain.found) throw new BuildError(toolchain.reason, '');
      const toolchainDir = toolchainRoot(toolchain);
      for (const step of this.steps(
        request.fn.spec.runtime,
        staging,
        request.fn.spec.entrypoint,
        toolchain,
      )) {
        output += `[sless] $ ${step.command} ${step.args.join(' ')}\n`;
        const result = await runCommand(
          this.options.launcher,
          {
            command: step.command,
            args: step.args,
            cwd: step.cwd,
            env: { ...buildEnv(cacheDir, this.options.launcher.report.sandboxed), ...step.env },
            tenant,
            readable: [this.options.runtimesDir, ...(toolchainDir ? [toolchainDir] : [])],
            writable: [staging, cacheDir],
            network: 'outbound',
            memoryMb: BUILD_MEMORY_MB,
            maxProcesses: BUILD_MAX_PROCESSES,
          },
          { timeoutMs: this.options.stepTimeoutMs ?? 600_000 },
        );
        output += result.output;
        if (result.exitCode !== 0) {
          throw new BuildError(
            `${step.command} ${step.args[0] ?? ''} failed with ${result.signal ?? `exit code ${result.exitCode}`}`,
            tail(output),
          );
        }
      }
      const finished = Date.now();
      const done: BuildRecord = {
        ...record,
        result: 'Succeeded',
        finishedAt: new Date(finished).toISOString(),
        durationMs: finished - started,
        logTail: tail(output),
        image: dir,
      };
      await writeFile(join(staging, 'build.json'), `${JSON.stringify(done, null, 2)}\n`);
      await mkdir(join(dir, '..'), { recursive: true });
      await rm(dir, { recursive: true, force: true });
      await rename(staging, dir);
      log.info({ durationMs: done.durationMs }, 'build succeeded');
      this.options.onBuildFinished?.(done, request.fn);
      return done;
    } catch (thrown) {
      await rm(staging, { recursive: true, force: true }).catch(() => undefined);
      const error = asError(thrown);
      const logTail = error instanceof BuildError && error.logTail ? error.logTail : tail(output);
      const finished = Date.now();
      const failed: BuildRecord = {
        ...record,
        result: 'Failed',
        finishedAt: new Date(finished).toISOString(),
        durationMs: finished - started,
        message: error.message,
        logTail,
      };
      // Recorded before it is told: a kill -9 right after the log line must not build the same code again.
      await this.options.failedBuilds?.set(request.fn, request.buildKey, failed);
      log.warn({ err: error.message }, 'build failed');
      this.options.onBuildFinished?.(failed, request.fn);
      // Only the function's own build failing is final; a file system error may pass on retry.
      if (error instanceof BuildError) throw new BuildFailedError(failed, error);
      throw error;
    } finally {
      this.staging.delete(staging);
    }
  }

  /**
   * The namespace's package caches, handed to the user its builds run as once per process, whoever
   * made them: a cache that an unsandboxed run created belongs to sless's own user, and a sandboxed
   * build, which runs as the tenant's user, could not write to it.
   */
  private async tenantCache(namespace: string): Promise<string> {
    const dir = join(this.options.cacheDir ?? join(this.options.stateDir, 'cache'), namespace);
    if (!this.grantedCaches.has(dir)) {
      await mkdir(dir, { recursive: true });
      await this.options.launcher.grant(namespace, dir);
      this.grantedCaches.add(dir);
    }
    return dir;
  }

  private steps(
    runtime: RuntimeName,
    staging: string,
    entrypoint: string,
    toolchain: Extract<Toolchain, { found: true }>,
  ): Step[] {
    const code = join(staging, 'code');
    // No update check: it would ask the registry for npm's latest version and wait for the answer.
    const quiet = ['--no-audit', '--no-fund', '--no-update-notifier', '--loglevel=error'];
    switch (RUNTIME_INFO[runtime].family) {
      case 'node':
        if (!existsSync(join(code, 'package.json'))) return [];
        return existsSync(join(code, 'package-lock.json'))
          ? [{ command: 'npm', args: ['ci', '--omit=dev', ...quiet], cwd: code }]
          : [{ command: 'npm', args: ['install', '--omit=dev', '--no-package-lock', ...quiet], cwd: code }];
      case 'python':
        if (!existsSync(join(code, 'requirements.txt'))) return [];
        return [
          {
            command: toolchain.command,
            args: [
              '-m',
              'pip',
              'install',
              '--target',
              join(staging, 'deps'),
              '-r',
              'requirements.txt',
              '--no-input',
              '--disable-pip-version-check',
              '--quiet',
            ],
            cwd: code,
          },
        ];
      case 'go':
        return [
          {
            command: 'bash',
            env: toolchain.env,
            args: [
              join(this.options.runtimesDir, RUNTIME_INFO[runtime].serverDir, 'build.sh'),
              code,
              join(staging, 'bin', 'function'),
              entrypoint,
            ],
            cwd: staging,
          },
        ];
    }
  }
}

/**
 * In a function's image the code sits at `/sless/code` with no `package.json` above it, so Node
 * decides each file's module type from the code's own `package.json` or, without one, from its
 * syntax. A local build directory sits wherever the state directory is, often under sless's own
 * `package.json` with `"type": "module"`, which would force CommonJS handlers to load as ES modules
 * and fail. A typeless `package.json` at the build root ends Node's lookup there, as `/` does in the
 * image. Python needs nothing here: its import path never depends on parent directories.
 */
export const MODULE_BOUNDARY_FILE = 'package.json';

async function writeModuleBoundary(buildRoot: string): Promise<void> {
  const file = join(buildRoot, MODULE_BOUNDARY_FILE);
  if (existsSync(file)) return;
  await writeFile(file, '{}\n');
}
