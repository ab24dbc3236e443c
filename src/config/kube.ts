/**
 * `sless controller` configuration: env and flags → one frozen, validated object. Settings that
 * would otherwise only fail at build or run time are checked at startup instead: the S3 endpoint must
 * be a full URL (kaniko fails on a bare host), the registry must be a bare host[/path] (the tag is
 * added here, never :latest).
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { parseDuration } from '../core/duration.js';
import { DEFAULT_LEADER_TIMING, type LeaderElectionTiming } from '../core/leadership.js';
import { isDnsLabel } from '../core/naming.js';
import type { AuthSettings, WebhookSecretSettings } from './auth.js';
import type { CodeGateSettings } from './code-gate.js';
import {
  ConfigError,
  loadAuth,
  loadBuildHistory,
  loadCodeGate,
  loadMaxStreamSeconds,
  loadTenancy,
  loadWebhookSecretSettings,
  PACKAGE_ROOT,
  type TenancySettings,
} from './config.js';
import { type BuildEnvEntry, parsePackageMirrors } from './package-mirrors.js';

export interface KubeControllerConfig {
  readonly platform: 'kube';
  readonly host: string;
  readonly port: number;
  readonly externalUrl: string;
  readonly controllerNamespace: string;
  /** Undefined: all namespaces. */
  readonly watchNamespaces: readonly string[] | undefined;
  readonly registry: string;
  readonly insecureRegistry: boolean;
  readonly s3: {
    readonly endpoint: string;
    readonly bucket: string;
    readonly region: string;
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    /** Secret (controller namespace) kaniko reads its S3 credentials from. */
    readonly credentialsSecret: string;
  };
  readonly pushSecret: string;
  readonly imagePullSecrets: readonly string[];
  /**
   * The pull secret copied into every tenant namespace, without which its pods end in
   * ImagePullBackOff: `source` is a dockerconfigjson Secret in the controller namespace holding
   * pull-only credentials, `name` the Secret the function pods reference (the first of
   * `imagePullSecrets`). Undefined when no pull secret is referenced.
   */
  readonly pullSecret: { readonly source: string; readonly name: string } | undefined;
  readonly kanikoImage: string | undefined;
  /** kaniko `--registry-map` entries: `registry=mirror[/path]`, e.g. for an air-gapped cluster. */
  readonly kanikoRegistryMap: readonly string[];
  /** Package manager settings for the builds' dependency install (see package-mirrors.ts). */
  readonly buildPackageMirrors: readonly BuildEnvEntry[];
  /**
   * How `/fn/` reaches a function's pods: `service-dns` (`{fn}.{ns}.svc`, needs cluster DNS) or
   * `cluster-ip` (the Service's ClusterIP, read from the API: no DNS needed, e.g. a controller outside
   * the cluster on a node, or a cluster without DNS).
   */
  readonly functionRoute: FunctionRoute;
  readonly buildServiceAccount: string | undefined;
  readonly stateDir: string;
  /** How long a new revision may take to become available before it counts as failed. */
  readonly rolloutDeadlineMs: number;
  /** How long `/fn/` holds a request for a function at zero while it starts, before a 503. */
  readonly activationTimeoutMs: number;
  /** How many requests one function at zero may hold while it starts; more get a 503 at once. */
  readonly activationQueue: number;
  /**
   * Where pods in the cluster reach this controller's `/fn/` (`SLESS_ACTIVATOR_URL`, default the
   * `sless-api` Service of the controller namespace): cron Triggers of functions that scale to zero
   * call them there, so that a scheduled call starts the function as any request does.
   */
  readonly activatorUrl: string;
  readonly runtimesDir: string;
  readonly logLevel: string;
  readonly prettyLogs: boolean;
  readonly authDisabled: boolean;
  readonly auth: AuthSettings | undefined;
  readonly webhookSecrets: WebhookSecretSettings;
  readonly tenancy: TenancySettings;
  readonly codeGate: CodeGateSettings;
  readonly leaderElection: LeaderElectionSettings;
  /** Finished builds kept per function besides those serving or pinned (`SLESS_BUILD_HISTORY`). */
  readonly buildHistory: number;
  /**
   * Whether pruned builds' images are deleted from the registry (`SLESS_REGISTRY_DELETE`); the
   * registry must allow deletes (distribution: `storage.delete.enabled`).
   */
  readonly registryDelete: boolean;
  /**
   * The Secret in the controller namespace holding the age private key SOPS files are decrypted with
   * (`SLESS_SOPS_AGE_SECRET`, default `sless-sops-age`; its first key ending in `.agekey`).
   */
  readonly sopsAgeSecret: string;
  /** The sops binary (`SLESS_SOPS_BINARY`; `sops` on PATH by default). */
  readonly sopsBinary: string;
  /**
   * Whether a code-only change of an interpreted function is built by the controller as one new
   * layer on the function's earlier image, with no kaniko Job (`SLESS_CODE_LAYER`, default true).
   */
  readonly codeLayer: boolean;
  /**
   * Whether the leader keeps a DaemonSet that pulls the kaniko image and the base image of each
   * runtime in use onto every node before builds and pods need them (`SLESS_PREPULL`, default false:
   * it holds those images on every node, which the operator must allow; deploy/components/prepull).
   */
  readonly prepull: boolean;
  /**
   * `on` (default): `sless controller` proxies `/fn/` from a thread of its own (the gateway), as the
   * local platform does, away from the main thread's garbage-collection pauses; functions that scale
   * to zero, and whatever is not ready, still go to the main thread. `off`: all of `/fn/` from the main thread.
   */
  readonly proxyThread: boolean;
  /**
   * The longest a streamed `/fn/` answer may last, on either thread (`--max-stream-duration` /
   * `SLESS_MAX_STREAM_DURATION`, default 1h), as on the local platform.
   */
  readonly maxStreamSeconds: number;
  /**
   * Asynchronous invocations (`Prefer: respond-async`, `/fn-async/`): the RabbitMQ broker whose
   * stream journals them (`SLESS_ASYNC_AMQP_URL`, in the pod from a Secret through
   * `valueFrom.secretKeyRef`) and the stream's name (`SLESS_ASYNC_STREAM`). Undefined: off, and
   * `/fn/` serves every request synchronously.
   */
  readonly asyncInvocations: AsyncInvocationSettings | undefined;
}

export interface AsyncInvocationSettings {
  /** amqp:// or amqps://, with credentials: never logged. */
  readonly amqpUrl: string;
  readonly stream: string;
}

/**
 * Replicas elect one leader through a Lease in the controller namespace; only it reconciles, every
 * replica serves. `enabled: false` (SLESS_LEADER_ELECTION=false) makes a lone replica lead always.
 */
export interface LeaderElectionSettings {
  readonly enabled: boolean;
  readonly leaseName: string;
  /** This replica's name on the Lease: POD_NAME in a pod. */
  readonly identity: string;
  /** Where followers reach this replica when it leads (http://POD_IP:port); the listen address if unset. */
  readonly advertiseUrl: string | undefined;
  readonly timing: LeaderElectionTiming;
  /**
   * The Secret (controller namespace) holding the key followers sign their concurrency reports to
   * the leader with; the first replica to find it missing creates it.
   */
  readonly replicaKeySecret: string;
}

export type FunctionRoute = 'service-dns' | 'cluster-ip';

const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A full http(s) URL with a host: `minio:9000` or `s3.example.com` alone is refused. */
export function validateEndpoint(value: string | undefined, what: string): string {
  if (!value) throw new ConfigError(`${what} is required (a full URL such as https://s3.example.com)`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${what}: "${value}" is not a full URL; include the scheme, e.g. https://${value}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname)
    throw new ConfigError(`${what}: "${value}" is not a full URL; use http:// or https:// with a host`);
  return value.replace(/\/+$/, '');
}

/** `SLESS_KANIKO_REGISTRY_MAP`: `from=to[/path]` entries separated by `;` (kaniko's own syntax). */
export function parseRegistryMap(value: string | undefined): string[] {
  const entries = (value ?? '')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  const host = '[a-z0-9.-]+(:[0-9]+)?';
  for (const entry of entries)
    if (!new RegExp(`^${host}=${host}(/[a-z0-9._/-]+)?$`).test(entry))
      throw new ConfigError(
        `SLESS_KANIKO_REGISTRY_MAP: "${entry}" is not registry=mirror[/path] (e.g. index.docker.io=mirror.example.com/dockerhub)`,
      );
  return entries;
}

function parseFunctionRoute(value: string | undefined): FunctionRoute {
  const route = value || 'service-dns';
  if (route !== 'service-dns' && route !== 'cluster-ip')
    throw new ConfigError(`SLESS_FUNCTION_ROUTE: "${route}" is neither service-dns nor cluster-ip`);
  return route;
}

export function validateRegistry(value: string | undefined): string {
  if (!value) throw new ConfigError('SLESS_REGISTRY is required (e.g. registry.example.com:5000/sless)');
  if (/^[a-z]+:\/\//i.test(value)) throw new ConfigError(`SLESS_REGISTRY: "${value}" must not have a scheme`);
  if (!/^[a-z0-9.-]+(:[0-9]+)?(\/[a-z0-9._/-]+)?$/.test(value) || /:[^0-9]/.test(value.split('/')[0] ?? ''))
    throw new ConfigError(`SLESS_REGISTRY: "${value}" is not host[:port][/path] (lower case, no tag)`);
  return value.replace(/\/+$/, '');
}

/**
 * The pull secret to copy into tenant namespaces. Tenants can pull but never push: neither the source
 * nor any referenced pull secret may be the push secret.
 */
export function pullSecretConfig(
  pushSecret: string,
  imagePullSecrets: readonly string[],
  source: string | undefined,
): KubeControllerConfig['pullSecret'] {
  for (const name of [...imagePullSecrets, ...(source ? [source] : [])])
    if (!isDnsSubdomain(name)) throw new ConfigError(`pull secret "${name}" is not a Secret name`);
  if (imagePullSecrets.includes(pushSecret))
    throw new ConfigError(
      `SLESS_IMAGE_PULL_SECRETS names the push secret "${pushSecret}": tenants can pull but never push`,
    );
  if (source === pushSecret)
    throw new ConfigError(
      `SLESS_PULL_SECRET is the push secret "${pushSecret}": the pull secret must hold pull-only credentials`,
    );
  const name = imagePullSecrets[0];
  if (name === undefined) {
    if (source)
      throw new ConfigError(
        'SLESS_PULL_SECRET is set but SLESS_IMAGE_PULL_SECRETS is empty: nothing would use it',
      );
    return undefined;
  }
  return Object.freeze({ source: source || name, name });
}

function booleanSetting(raw: string | undefined, name: string): boolean {
  const value = raw?.trim() || 'false';
  if (value !== 'true' && value !== 'false') throw new ConfigError(`${name}: "${raw}" must be true or false`);
  return value === 'true';
}

function durationSetting(name: string, raw: string | undefined, fallback: string): number {
  try {
    return parseDuration(raw?.trim() || fallback);
  } catch {
    throw new ConfigError(`${name}: "${raw}" is not a duration like 90s or 3m`);
  }
}

function positiveInteger(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 1_000_000)
    throw new ConfigError(`${name}: "${raw}" must be a whole number from 1 to 1000000`);
  return value;
}

export function loadLeaderElection(env: NodeJS.ProcessEnv, port: number): LeaderElectionSettings {
  const timing = {
    leaseDurationMs: durationSetting(
      'SLESS_LEASE_DURATION',
      env.SLESS_LEASE_DURATION,
      `${DEFAULT_LEADER_TIMING.leaseDurationMs}ms`,
    ),
    renewDeadlineMs: durationSetting(
      'SLESS_LEASE_RENEW_DEADLINE',
      env.SLESS_LEASE_RENEW_DEADLINE,
      `${DEFAULT_LEADER_TIMING.renewDeadlineMs}ms`,
    ),
    retryPeriodMs: durationSetting(
      'SLESS_LEASE_RETRY_PERIOD',
      env.SLESS_LEASE_RETRY_PERIOD,
      `${DEFAULT_LEADER_TIMING.retryPeriodMs}ms`,
    ),
  };
  // The leader must give up before anyone else may take over, or two would reconcile at once.
  if (timing.renewDeadlineMs >= timing.leaseDurationMs)
    throw new ConfigError('SLESS_LEASE_RENEW_DEADLINE must be shorter than SLESS_LEASE_DURATION');
  if (timing.retryPeriodMs >= timing.renewDeadlineMs)
    throw new ConfigError('SLESS_LEASE_RETRY_PERIOD must be shorter than SLESS_LEASE_RENEW_DEADLINE');
  const replicaKeySecret = env.SLESS_REPLICA_KEY_SECRET?.trim() || 'sless-replica-key';
  if (!isDnsSubdomain(replicaKeySecret))
    throw new ConfigError(`SLESS_REPLICA_KEY_SECRET: "${replicaKeySecret}" is not a Secret name`);
  const advertised = env.SLESS_ADVERTISE_URL?.trim();
  const podIp = env.POD_IP?.trim();
  return Object.freeze({
    enabled: env.SLESS_LEADER_ELECTION !== 'false',
    leaseName: env.SLESS_LEASE_NAME?.trim() || 'sless-controller',
    identity: env.POD_NAME?.trim() || `${hostname()}-${process.pid}`,
    advertiseUrl: advertised
      ? validateEndpoint(advertised, 'SLESS_ADVERTISE_URL')
      : podIp
        ? `http://${podIp.includes(':') ? `[${podIp}]` : podIp}:${port}`
        : undefined,
    timing: Object.freeze(timing),
    replicaKeySecret,
  });
}

/** `SLESS_ASYNC_AMQP_URL` and `SLESS_ASYNC_STREAM`; undefined when no URL is set. */
export function loadAsyncInvocations(env: NodeJS.ProcessEnv): AsyncInvocationSettings | undefined {
  const raw = env.SLESS_ASYNC_AMQP_URL?.trim();
  if (!raw) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  // The value carries a password: the message never repeats it.
  if (!url || (url.protocol !== 'amqp:' && url.protocol !== 'amqps:') || !url.hostname)
    throw new ConfigError('SLESS_ASYNC_AMQP_URL is not an amqp:// or amqps:// URL with a host');
  const stream = env.SLESS_ASYNC_STREAM?.trim() || 'sless.invocations';
  if (!/^[A-Za-z0-9._:-]{1,200}$/.test(stream) || stream.startsWith('amq.'))
    throw new ConfigError(
      `SLESS_ASYNC_STREAM: "${stream}" is not a queue name (letters, digits, . _ : -; not amq.*)`,
    );
  return Object.freeze({ amqpUrl: raw, stream });
}

function isDnsSubdomain(value: string): boolean {
  return (
    value.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(value)
  );
}

export function loadKubeControllerConfig(
  flags: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): KubeControllerConfig {
  const host = String(flags.host ?? env.SLESS_HOST ?? '0.0.0.0');
  const port = Number(flags.port ?? env.SLESS_PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError(`--port: "${port}" is not a port`);
  let controllerNamespace = String(
    flags.namespace ?? env.SLESS_CONTROLLER_NAMESPACE ?? env.POD_NAMESPACE ?? '',
  );
  if (!controllerNamespace) {
    try {
      controllerNamespace = readFileSync(SA_NAMESPACE_FILE, 'utf8').trim();
    } catch {
      throw new ConfigError('SLESS_CONTROLLER_NAMESPACE is required outside a pod');
    }
  }
  if (!isDnsLabel(controllerNamespace))
    throw new ConfigError(`SLESS_CONTROLLER_NAMESPACE: "${controllerNamespace}" is not a namespace name`);
  const watched = list(
    typeof flags['watch-namespaces'] === 'string' ? flags['watch-namespaces'] : env.SLESS_WATCH_NAMESPACES,
  );
  for (const ns of watched)
    if (!isDnsLabel(ns)) throw new ConfigError(`SLESS_WATCH_NAMESPACES: "${ns}" is not a namespace name`);
  const accessKeyId = env.AWS_ACCESS_KEY_ID ?? '';
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY ?? '';
  if (!accessKeyId || !secretAccessKey)
    throw new ConfigError(
      'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are required (build contexts go to S3)',
    );
  const bucket = env.SLESS_S3_BUCKET ?? '';
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new ConfigError(`SLESS_S3_BUCKET: "${bucket}" is not a bucket name`);
  const auth = loadAuth(env);
  const loopback = ['127.0.0.1', '::1', 'localhost'].includes(host);
  if (!auth && !loopback)
    throw new ConfigError(
      'the controller serves /v1 beyond loopback: set SLESS_AUTH_JWKS_URL or SLESS_AUTH_PUBLIC_KEY with SLESS_AUTH_ISSUER and SLESS_AUTH_AUDIENCE',
    );
  const proxyThread = String(flags['proxy-thread'] ?? env.SLESS_PROXY_THREAD ?? 'on');
  if (proxyThread !== 'on' && proxyThread !== 'off')
    throw new ConfigError(`--proxy-thread: "${proxyThread}" must be on or off`);
  const pushSecret = env.SLESS_PUSH_SECRET ?? 'sless-registry-push';
  const imagePullSecrets = list(env.SLESS_IMAGE_PULL_SECRETS ?? 'sless-registry-pull');
  const pullSecret = pullSecretConfig(pushSecret, imagePullSecrets, env.SLESS_PULL_SECRET?.trim());
  const externalUrl = validateEndpoint(
    env.SLESS_EXTERNAL_URL ?? `http://localhost:${port}`,
    'SLESS_EXTERNAL_URL',
  );
  return Object.freeze({
    platform: 'kube',
    host,
    port,
    externalUrl,
    controllerNamespace,
    watchNamespaces: watched.length > 0 ? Object.freeze(watched) : undefined,
    registry: validateRegistry(typeof flags.registry === 'string' ? flags.registry : env.SLESS_REGISTRY),
    insecureRegistry: env.SLESS_REGISTRY_INSECURE === 'true',
    s3: Object.freeze({
      endpoint: validateEndpoint(env.SLESS_S3_ENDPOINT, 'SLESS_S3_ENDPOINT'),
      bucket,
      region: env.SLESS_S3_REGION ?? env.AWS_REGION ?? 'us-east-1',
      accessKeyId,
      secretAccessKey,
      credentialsSecret: env.SLESS_S3_CREDENTIALS_SECRET ?? 'sless-s3',
    }),
    pushSecret,
    imagePullSecrets: Object.freeze(imagePullSecrets),
    pullSecret,
    kanikoImage: env.SLESS_KANIKO_IMAGE || undefined,
    kanikoRegistryMap: Object.freeze(parseRegistryMap(env.SLESS_KANIKO_REGISTRY_MAP)),
    buildPackageMirrors: parsePackageMirrors(env.SLESS_BUILD_PACKAGE_MIRRORS),
    functionRoute: parseFunctionRoute(env.SLESS_FUNCTION_ROUTE),
    buildServiceAccount: env.SLESS_BUILD_SERVICE_ACCOUNT || undefined,
    stateDir: resolve(env.SLESS_STATE_DIR ?? '/tmp/sless'),
    rolloutDeadlineMs: durationSetting('SLESS_ROLLOUT_DEADLINE', env.SLESS_ROLLOUT_DEADLINE, '3m'),
    activationTimeoutMs: durationSetting('SLESS_ACTIVATION_TIMEOUT', env.SLESS_ACTIVATION_TIMEOUT, '60s'),
    activationQueue: positiveInteger('SLESS_ACTIVATION_QUEUE', env.SLESS_ACTIVATION_QUEUE, 1000),
    activatorUrl: validateEndpoint(
      env.SLESS_ACTIVATOR_URL?.trim() || `http://sless-api.${controllerNamespace}.svc`,
      'SLESS_ACTIVATOR_URL',
    ),
    runtimesDir: resolve(PACKAGE_ROOT, 'runtimes'),
    logLevel: String(env.SLESS_LOG_LEVEL ?? env.LOG_LEVEL ?? 'info'),
    prettyLogs: false,
    authDisabled: auth === undefined,
    auth,
    webhookSecrets: loadWebhookSecretSettings(env),
    tenancy: loadTenancy(env),
    codeGate: loadCodeGate(env),
    leaderElection: loadLeaderElection(env, port),
    buildHistory: loadBuildHistory(env.SLESS_BUILD_HISTORY),
    registryDelete: booleanSetting(env.SLESS_REGISTRY_DELETE, 'SLESS_REGISTRY_DELETE'),
    sopsAgeSecret: env.SLESS_SOPS_AGE_SECRET || 'sless-sops-age',
    sopsBinary: env.SLESS_SOPS_BINARY || 'sops',
    codeLayer: !(env.SLESS_CODE_LAYER?.trim() && !booleanSetting(env.SLESS_CODE_LAYER, 'SLESS_CODE_LAYER')),
    prepull: booleanSetting(env.SLESS_PREPULL, 'SLESS_PREPULL'),
    proxyThread: proxyThread === 'on',
    maxStreamSeconds: loadMaxStreamSeconds(flags['max-stream-duration'], env),
    asyncInvocations: loadAsyncInvocations(env),
  } as const);
}
