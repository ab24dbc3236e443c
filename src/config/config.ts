/**
 * Local mode's configuration: flags and environment read once at start-up into one frozen object,
 * every value checked and every unsafe combination refused there (no auth off loopback, no
 * unsandboxed tenant code with auth on), so nothing later has to check again. Kube mode's
 * configuration reuses the loaders for what both platforms configure alike (auth, tenancy, build
 * history, the code gate).
 */
import { Resolver } from 'node:dns';
import { BlockList } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { intervalProblem, parseDuration } from '../core/duration.js';
import { DEFAULT_QUOTAS, QUOTA_ENV, type Quotas } from '../core/quotas.js';
import { addRange } from '../source/outbound.js';
import {
  AuthConfigError,
  type AuthSettings,
  loadAuthSettings,
  loadWebhookSecrets,
  type WebhookSecretSettings,
} from './auth.js';
import { CodeGateConfigError, type CodeGateSettings, loadCodeGateSettings } from './code-gate.js';

export interface LocalConfig {
  readonly platform: 'local';
  readonly host: string;
  readonly port: number;
  /** The repository to watch: an absolute path or an http(s) URL. Undefined: the bundled examples. */
  readonly repo: string | undefined;
  readonly branch: string | undefined;
  readonly namespace: string;
  readonly sourceName: string;
  readonly interval: string;
  /** Platform-wide scale to zero for functions without their own `scaleToZero`; undefined: off. */
  readonly scaleToZeroAfterSeconds: number | undefined;
  /** The longest a streamed /fn/ answer may last (`--max-stream-duration`, default 1h). */
  readonly maxStreamSeconds: number;
  readonly stateDir: string;
  /**
   * `auto`: tenant code runs sandboxed where the machine allows it (required with auth on). `off`:
   * single-user loopback mode only, for functions that must reach the user's own files and ports.
   */
  readonly sandbox: 'auto' | 'off';
  /**
   * `on`: `/fn/` is proxied from a thread of its own (the gateway), away from the pauses of the main
   * thread's garbage collector; `off`: from the main thread, with the API.
   */
  readonly proxyThread: boolean;
  /** Package caches for builds, one directory per namespace; default `{stateDir}/cache`. */
  readonly buildCacheDir: string | undefined;
  readonly runtimesDir: string;
  readonly examplesDir: string;
  readonly externalUrl: string;
  readonly logLevel: string;
  readonly prettyLogs: boolean;
  /** True when no SLESS_AUTH_* key is configured; only allowed on loopback. */
  readonly authDisabled: boolean;
  /** JWT verification settings for `/v1`; undefined when auth is off. */
  readonly auth: AuthSettings | undefined;
  readonly webhookSecrets: WebhookSecretSettings;
  readonly tenancy: TenancySettings;
  /** The SLESS_SECRET_<NS>__<NAME>_* variables: git credentials per namespace (local mode's Secrets). */
  readonly gitSecrets: Readonly<Record<string, string>>;
  /** The code security gate before builds (off by default). */
  readonly codeGate: CodeGateSettings;
  /** Finished builds kept per function besides those serving or pinned (`SLESS_BUILD_HISTORY`). */
  readonly buildHistory: number;
  /** The age private key SOPS files in git are decrypted with (`--sops-age-key-file`, `SOPS_AGE_KEY_FILE`). */
  readonly sopsAgeKeyFile: string | undefined;
  /** The sops binary (`SLESS_SOPS_BINARY`; `sops` on PATH by default). */
  readonly sopsBinary: string;
}

/** What limits tenants, the same on both platforms. */
export interface TenancySettings {
  readonly quotas: Quotas;
  /** Ranges tenant URLs may reach although private or loopback (SLESS_OUTBOUND_ALLOW; admin only). */
  readonly outboundAllow: readonly string[];
  /** Name servers that resolve tenant URLs' hosts instead of the system resolver (SLESS_OUTBOUND_DNS). */
  readonly outboundDns: readonly string[];
  /** A static bearer token for Prometheus scrapes of /metrics when auth is on (besides admin JWTs). */
  readonly metricsToken: string | undefined;
}

export class ConfigError extends Error {}

/** `--max-stream-duration` / SLESS_MAX_STREAM_DURATION: 30s, 10m or 2h, from 1 s to 24 h; 1 h if unset. */
export function loadMaxStreamSeconds(flag: string | boolean | undefined, env: NodeJS.ProcessEnv): number {
  const raw = String(flag ?? env.SLESS_MAX_STREAM_DURATION ?? '1h');
  const ms = /^[0-9]+(s|m|h)$/.test(raw) ? parseDuration(raw) : 0;
  if (ms < 1000 || ms > 86_400_000)
    throw new ConfigError(`--max-stream-duration: "${raw}" must look like 30s, 10m or 2h (1s to 24h)`);
  return ms / 1000;
}

/** The package root, found from this file rather than the working directory. */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

export function loadLocalConfig(
  flags: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): LocalConfig {
  const host = String(flags.host ?? env.SLESS_HOST ?? '127.0.0.1');
  const port = Number(flags.port ?? env.SLESS_PORT ?? env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError(`--port: "${String(flags.port ?? env.PORT)}" is not a port number`);
  const interval = String(flags.interval ?? env.SLESS_INTERVAL ?? '10s');
  const intervalIssue = intervalProblem(interval);
  if (intervalIssue) throw new ConfigError(`--interval: "${interval}" ${intervalIssue}`);
  const idleAfter = String(flags['scale-to-zero-after'] ?? env.SLESS_SCALE_TO_ZERO_AFTER ?? '');
  let scaleToZeroAfterSeconds: number | undefined;
  if (idleAfter !== '') {
    const ms = /^[0-9]+(s|m|h)$/.test(idleAfter) ? parseDuration(idleAfter) : 0;
    if (ms < 1000 || ms > 86_400_000)
      throw new ConfigError(`--scale-to-zero-after: "${idleAfter}" must look like 30s, 5m or 1h (1s to 24h)`);
    scaleToZeroAfterSeconds = ms / 1000;
  }
  const maxStreamSeconds = loadMaxStreamSeconds(flags['max-stream-duration'], env);
  const repoFlag = typeof flags.repo === 'string' ? flags.repo : env.SLESS_REPO;
  const repo =
    repoFlag === undefined ? undefined : /^https?:\/\//.test(repoFlag) ? repoFlag : resolve(repoFlag);
  const stateDir = resolve(String(flags['state-dir'] ?? env.SLESS_STATE_DIR ?? '.sless'));
  const auth = loadAuth(env);
  const authDisabled = auth === undefined;
  // Without auth the API is open to whoever can connect; that is only acceptable on loopback.
  if (authDisabled && !LOOPBACK.has(host)) {
    throw new ConfigError(
      `--host ${host}: without authentication local mode only binds to loopback (127.0.0.1, ::1); ` +
        'set SLESS_AUTH_JWKS_URL or SLESS_AUTH_PUBLIC_KEY with SLESS_AUTH_ISSUER and SLESS_AUTH_AUDIENCE',
    );
  }
  const sandbox = String(flags.sandbox ?? env.SLESS_SANDBOX ?? 'auto');
  if (sandbox !== 'auto' && sandbox !== 'off')
    throw new ConfigError(`--sandbox: "${sandbox}" must be auto or off`);
  if (sandbox === 'off' && !authDisabled)
    throw new ConfigError(
      "--sandbox off: with authentication on, tenants' code runs here and must be sandboxed; off is for single-user loopback mode only",
    );
  const proxyThread = String(flags['proxy-thread'] ?? env.SLESS_PROXY_THREAD ?? 'on');
  if (proxyThread !== 'on' && proxyThread !== 'off')
    throw new ConfigError(`--proxy-thread: "${proxyThread}" must be on or off`);
  const externalUrl = String(
    env.SLESS_EXTERNAL_URL ??
      `http://${host.includes(':') ? `[${host}]` : host === '127.0.0.1' ? 'localhost' : host}:${port}`,
  ).replace(/\/+$/, '');
  const namespace = String(flags.namespace ?? 'default');
  return Object.freeze({
    platform: 'local',
    host,
    port,
    repo,
    branch: typeof flags.branch === 'string' ? flags.branch : undefined,
    namespace,
    sourceName: String(flags.source ?? 'examples'),
    interval,
    scaleToZeroAfterSeconds,
    maxStreamSeconds,
    stateDir,
    sandbox,
    proxyThread: proxyThread === 'on',
    buildCacheDir:
      typeof flags['build-cache-dir'] === 'string'
        ? resolve(flags['build-cache-dir'])
        : env.SLESS_BUILD_CACHE_DIR
          ? resolve(env.SLESS_BUILD_CACHE_DIR)
          : undefined,
    runtimesDir: resolve(PACKAGE_ROOT, 'runtimes'),
    examplesDir: resolve(PACKAGE_ROOT, 'examples-repo'),
    externalUrl,
    logLevel: String(env.SLESS_LOG_LEVEL ?? env.LOG_LEVEL ?? 'info'),
    prettyLogs: flags.json === true ? false : process.stdout.isTTY === true,
    authDisabled,
    auth,
    webhookSecrets: loadWebhookSecretSettings(env),
    tenancy: loadTenancy(env),
    codeGate: loadCodeGate(env),
    buildHistory: loadBuildHistory(
      typeof flags['build-history'] === 'string' ? flags['build-history'] : env.SLESS_BUILD_HISTORY,
    ),
    gitSecrets: Object.freeze(
      Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('SLESS_SECRET_'))),
    ) as Readonly<Record<string, string>>,
    sopsAgeKeyFile: sopsKeyFile(flags['sops-age-key-file'], env.SOPS_AGE_KEY_FILE),
    sopsBinary: String(env.SLESS_SOPS_BINARY ?? 'sops'),
  } as const);
}

function sopsKeyFile(flag: unknown, env: string | undefined): string | undefined {
  const value = typeof flag === 'string' ? flag : env;
  return value ? resolve(value) : undefined;
}

/** Builds kept per function when nothing says otherwise: enough to roll back a few commits at once. */
export const DEFAULT_BUILD_HISTORY = 5;

/**
 * `SLESS_BUILD_HISTORY` (`--build-history`): how many finished builds of each function are kept,
 * besides the ones that serve or are pinned, which are never removed. 0 keeps only those.
 */
export function loadBuildHistory(value: string | undefined): number {
  const text = value?.trim();
  if (!text) return DEFAULT_BUILD_HISTORY;
  const limit = Number(text);
  if (!/^[0-9]+$/.test(text) || limit > 1000)
    throw new ConfigError(`SLESS_BUILD_HISTORY: "${text}" must be a whole number from 0 to 1000`);
  return limit;
}

export function loadWebhookSecretSettings(env: NodeJS.ProcessEnv): WebhookSecretSettings {
  try {
    return loadWebhookSecrets(env);
  } catch (error) {
    if (error instanceof AuthConfigError) throw new ConfigError(error.message);
    throw error;
  }
}

/** Code gate settings from the environment, reported like every other config error. */
export function loadCodeGate(env: NodeJS.ProcessEnv): CodeGateSettings {
  try {
    return loadCodeGateSettings(env);
  } catch (error) {
    if (error instanceof CodeGateConfigError) throw new ConfigError(error.message);
    throw error;
  }
}

export function loadTenancy(env: NodeJS.ProcessEnv): TenancySettings {
  const quotas = { ...DEFAULT_QUOTAS };
  for (const key of Object.keys(QUOTA_ENV) as (keyof Quotas)[]) {
    const text = env[QUOTA_ENV[key]]?.trim();
    if (!text) continue;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1 || value > 1_000_000)
      throw new ConfigError(`${QUOTA_ENV[key]}: "${text}" must be a whole number from 1 to 1000000`);
    quotas[key] = value;
  }
  const outboundAllow = (env.SLESS_OUTBOUND_ALLOW ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const range of outboundAllow) {
    try {
      addRange(new BlockList(), range);
    } catch (error) {
      throw new ConfigError(`SLESS_OUTBOUND_ALLOW: ${(error as Error).message}`);
    }
  }
  const outboundDns = (env.SLESS_OUTBOUND_DNS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  try {
    new Resolver().setServers(outboundDns);
  } catch (error) {
    throw new ConfigError(
      `SLESS_OUTBOUND_DNS: ${(error as Error).message} (use 1.1.1.1, 1.1.1.1:53 or [::1]:53)`,
    );
  }
  const metricsToken = env.SLESS_METRICS_TOKEN?.trim() || undefined;
  if (metricsToken !== undefined && metricsToken.length < 16)
    throw new ConfigError('SLESS_METRICS_TOKEN: use at least 16 characters');
  return Object.freeze({
    quotas: Object.freeze(quotas),
    outboundAllow: Object.freeze(outboundAllow),
    outboundDns: Object.freeze(outboundDns),
    metricsToken,
  });
}

/** Auth settings from the environment, with their errors reported like every other config error. */
export function loadAuth(env: NodeJS.ProcessEnv): AuthSettings | undefined {
  try {
    return loadAuthSettings(env);
  } catch (error) {
    if (error instanceof AuthConfigError) throw new ConfigError(error.message);
    throw error;
  }
}
