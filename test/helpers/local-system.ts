/**
 * The whole local platform for a test, started in-process as `sless dev` runs it (proxy thread by
 * default) on a free port, syncing one GitSource from the given repository, in a state directory of its
 * own (removed on close unless one was given); plus polling helpers for the status it reports, and one
 * such system serving the stream function of every runtime.
 */
import { readdir, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { type Logger, pino } from 'pino';
import { loadLocalConfig } from '../../src/config/config.js';
import type { FunctionStatus, GitSource, GitSourceStatus } from '../../src/core/resources.js';
import { type LocalSystem, startLocalSystem } from '../../src/main.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { gitSource, TestRepo, tempDir } from './git.js';
import { STREAM_RUNTIMES, streamFunction } from './stream-functions.js';

export const TEST_BUILD_CACHE = join(homedir(), '.cache', 'sless', 'test-build-cache');

export interface TestSystem extends LocalSystem {
  stateDir: string;
  call(path: string, init?: RequestInit): Promise<Response>;
  functionStatus(name: string): Promise<FunctionStatus | undefined>;
  sourceStatus(): Promise<GitSourceStatus | undefined>;
  /**
   * Successful builds of a function kept on disk: one directory per build key, so this counts real
   * builds as long as there are no more than the history limit (`SLESS_BUILD_HISTORY`, default 5).
   */
  buildCount(name: string): Promise<number>;
  close(): Promise<void>;
}

export async function startTestSystem(options: {
  url: string;
  branch?: string;
  interval?: string;
  path?: string;
  /** Reuse a state directory (builds survive restarts); it is then left in place on close. */
  stateDir?: string;
  /** `off` for tests whose functions must write the test's own files (single-user mode). */
  sandbox?: 'auto' | 'off';
  /** `--build-cache-dir` (default: the package caches every test shares, TEST_BUILD_CACHE). */
  buildCacheDir?: string;
  /** More settings, as the environment would give them (quotas, secrets). */
  env?: NodeJS.ProcessEnv;
  /** `--scale-to-zero-after` (platform-wide scale to zero with lazy start), e.g. '30s'. */
  scaleToZeroAfter?: string;
  /**
   * `/fn/` from the proxy thread, as `sless dev` serves it (the default); false: from the main thread,
   * as `--proxy-thread off` and the kube controller serve it.
   */
  proxyThread?: boolean;
  /** What sless logs goes here (silent by default; SLESS_TEST_LOG sets a level). */
  logger?: Logger;
  /** `--sops-age-key-file`. */
  sopsAgeKeyFile?: string;
  /** The GitSource's spec.previews (branch previews). */
  previews?: GitSource['spec']['previews'];
}): Promise<TestSystem> {
  const stateDir = options.stateDir ?? (await tempDir('state'));
  const config = loadLocalConfig(
    {
      port: '0',
      'state-dir': stateDir,
      interval: options.interval ?? '1h',
      // Sandboxed builds keep package caches per namespace; sharing them across tests spares every test
      // a cold Go standard library build (minutes on this machine).
      'build-cache-dir': options.buildCacheDir ?? TEST_BUILD_CACHE,
      sandbox: options.sandbox ?? 'auto',
      'scale-to-zero-after': options.scaleToZeroAfter,
      'sops-age-key-file': options.sopsAgeKeyFile,
    },
    // The test git server listens on loopback: an admin's explicit allowance, as in production.
    { SLESS_OUTBOUND_ALLOW: '127.0.0.1/32', ...options.env },
  );
  const logger = options.logger ?? pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' });
  const gateway =
    options.proxyThread === false
      ? undefined
      : await Gateway.start('127.0.0.1', 0, { maxStreamMs: config.maxStreamSeconds * 1000 });
  gateway?.report({
    upstreamError: (fn, message) => logger.warn({ function: fn, err: message }, 'upstream failed'),
    failed: (error) => logger.error({ err: error.message }, 'the proxy thread stopped'),
  });
  const starting = startLocalSystem(config, {
    ...(gateway ? { listener: gateway, gateway } : {}),
    logger,
    source: gitSource('test', 'default', options.url, {
      branch: options.branch ?? 'main',
      path: options.path ?? '.',
      interval: options.interval ?? '1h',
      ...(options.previews ? { previews: options.previews } : {}),
    }),
  });
  const system = await starting.catch(async (error: unknown) => {
    await gateway?.close();
    throw error;
  });
  return {
    ...system,
    stateDir,
    call: (path, init) => fetch(`${system.url}${path}`, init),
    functionStatus: async (name) =>
      (await system.store.get('Function', 'default', name))?.status as FunctionStatus | undefined,
    sourceStatus: async () =>
      (await system.store.get('GitSource', 'default', 'test'))?.status as GitSourceStatus | undefined,
    buildCount: async (name) => {
      try {
        const entries = await readdir(join(stateDir, 'builds', 'default', name));
        return entries.filter((e) => !e.includes('.staging-')).length;
      } catch {
        return 0;
      }
    },
    close: async () => {
      await system.stop();
      // stop() does not wait for a git fetch already in flight, which may still write into the
      // source cache for a moment (CI saw ENOTEMPTY); rm tries again then.
      if (!options.stateDir)
        await rm(stateDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    },
  };
}

/** Polls until the check passes (returns a truthy value) or the time is up; fails with the last error. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function bodyOf(system: TestSystem, path: string): Promise<{ status: number; text: string }> {
  const response = await system.call(path);
  return { status: response.status, text: await response.text() };
}

/** Waits until the function's status shows `count` instances desired and as many ready. */
export async function untilInstances(system: TestSystem, name: string, count: number): Promise<void> {
  await eventually(
    async () => {
      const now = (await system.functionStatus(name))?.instances;
      return now?.desired === count && now.ready === count;
    },
    30_000,
    `${count} instance(s) of ${name}`,
  );
}

/**
 * A system serving the stream function of each runtime in STREAM_RUNTIMES, named by `name`, once every
 * one reports Ready. Their first builds install Python and Go dependencies, hence the long wait; if it
 * fails, the system and the repository are removed here, since the caller never gets them.
 */
export async function startStreamRuntimes(
  name: (runtime: string) => string,
): Promise<{ repo: TestRepo; system: TestSystem }> {
  const repo = await TestRepo.create(
    Object.assign({}, ...STREAM_RUNTIMES.map((runtime) => streamFunction(name(runtime), runtime))),
  );
  let system: TestSystem | undefined;
  try {
    system = await startTestSystem({ url: repo.dir });
    const started = system;
    await eventually(
      async () => {
        for (const runtime of STREAM_RUNTIMES)
          if ((await started.functionStatus(name(runtime)))?.phase !== 'Ready') return false;
        return true;
      },
      240_000,
      'python and go functions deployed',
    );
    return { repo, system };
  } catch (error) {
    await system?.close();
    await repo.remove();
    throw error;
  }
}
