/**
 * Where the controller finds the API server and its credentials, as client-node's
 * `KubeConfig.loadFromDefault()` finds them: KUBECONFIG, else ~/.kube/config, else the in-cluster
 * service account. The common shapes (the in-cluster account, a kubeconfig with a token, a client
 * certificate or a password) are read here; anything else (exec plugins, auth providers, proxies,
 * several files merged) goes to client-node's KubeConfig. Importing client-node costs about 50 MB of
 * resident memory (its generated API clients and models load with KubeConfig), about a third of what
 * the whole controller needs, so it is imported only when one of those shapes needs it.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { OutgoingHttpHeaders } from 'node:http';
import type { RequestOptions } from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';

/** What KubeHttp needs of a kubeconfig. client-node's KubeConfig has this shape too (tests pass one). */
export interface KubeCredentials {
  getCurrentCluster(): { server: string } | null;
  /** Sets `ca`, `cert`, `key`, `rejectUnauthorized`, `servername`, `auth` and `headers` for one request. */
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** client-go re-reads a token file once a minute: rotated service-account tokens are picked up. */
const TOKEN_FILE_TTL_MS = 60_000;

interface ClusterEntry {
  server: string;
  caFile?: string;
  caData?: string;
  skipTLSVerify?: boolean;
  tlsServerName?: string;
}

interface UserEntry {
  token?: string;
  tokenFile?: string;
  certFile?: string;
  certData?: string;
  keyFile?: string;
  keyData?: string;
  username?: string;
  password?: string;
}

/** A cluster and a user read once; files named in them are read per request, as client-node does. */
export class StaticCredentials implements KubeCredentials {
  private readonly cluster: ClusterEntry;
  private readonly user: UserEntry;
  private readonly now: () => number;
  private token: { value: string; readAt: number } | undefined;

  constructor(cluster: ClusterEntry, user: UserEntry, options: { now?: () => number } = {}) {
    this.cluster = cluster;
    this.user = user;
    this.now = options.now ?? Date.now;
  }

  getCurrentCluster(): { server: string } {
    return { server: this.cluster.server };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    const { cluster, user } = this;
    if (cluster.skipTLSVerify) options.rejectUnauthorized = false;
    if (cluster.tlsServerName) options.servername = cluster.tlsServerName;
    const ca = fileOrData(cluster.caFile, cluster.caData);
    if (ca) options.ca = ca;
    const cert = fileOrData(user.certFile, user.certData);
    if (cert) options.cert = cert;
    const key = fileOrData(user.keyFile, user.keyData);
    if (key) options.key = key;
    const token = user.token ?? this.fileToken();
    if (token)
      options.headers = { ...(options.headers as OutgoingHttpHeaders), Authorization: `Bearer ${token}` };
    if (user.username) options.auth = `${user.username}:${user.password ?? ''}`;
  }

  private fileToken(): string | undefined {
    const file = this.user.tokenFile;
    if (!file) return undefined;
    if (!this.token || this.now() - this.token.readAt > TOKEN_FILE_TTL_MS)
      this.token = { value: readFileSync(file, 'utf8').trim(), readAt: this.now() };
    return this.token.value;
  }
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, 'base64');
  return undefined;
}

const CLUSTER_FIELDS: Record<string, keyof ClusterEntry> = {
  server: 'server',
  'certificate-authority': 'caFile',
  'certificate-authority-data': 'caData',
  'insecure-skip-tls-verify': 'skipTLSVerify',
  'tls-server-name': 'tlsServerName',
};

const USER_FIELDS: Record<string, keyof UserEntry> = {
  token: 'token',
  tokenFile: 'tokenFile',
  'client-certificate': 'certFile',
  'client-certificate-data': 'certData',
  'client-key': 'keyFile',
  'client-key-data': 'keyData',
  username: 'username',
  password: 'password',
};

const FILE_FIELDS = new Set(['caFile', 'certFile', 'keyFile', 'tokenFile']);

interface Named {
  name?: unknown;
  [entry: string]: unknown;
}

/** The entry named `name` in a kubeconfig list (`clusters`, `users`, `contexts`). */
function entry(list: unknown, name: unknown, field: string): Record<string, unknown> | undefined {
  if (!Array.isArray(list)) return undefined;
  const found = (list as Named[]).find((item) => item?.name === name)?.[field];
  return found && typeof found === 'object' ? (found as Record<string, unknown>) : undefined;
}

/** Copies the known fields; undefined when any other field is there (client-node handles those). */
function known<T extends object>(
  raw: Record<string, unknown>,
  fields: Record<string, keyof T>,
  baseDir: string,
): T | undefined {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(raw)) {
    const key = fields[field] as string | undefined;
    if (key === undefined) return undefined;
    if (value === undefined || value === null) continue;
    if (key === 'skipTLSVerify') {
      if (typeof value !== 'boolean') return undefined;
      out[key] = value;
      continue;
    }
    if (typeof value !== 'string') return undefined;
    out[key] = FILE_FIELDS.has(key) && !isAbsolute(value) ? join(baseDir, value) : value;
  }
  return out as T;
}

/**
 * The current context's cluster and user of a kubeconfig file, when they use only the fields read
 * here; undefined otherwise.
 */
export function readSimpleKubeconfig(file: string): StaticCredentials | undefined {
  const config = parse(readFileSync(file, 'utf8')) as Record<string, unknown> | null;
  if (!config || typeof config !== 'object') return undefined;
  const context = entry(config.contexts, config['current-context'], 'context');
  if (!context) return undefined;
  const rawCluster = entry(config.clusters, context.cluster, 'cluster');
  // A context without a user is allowed (an anonymous client); a named user must exist.
  const rawUser = context.user === undefined ? {} : entry(config.users, context.user, 'user');
  if (!rawCluster || !rawUser) return undefined;
  const baseDir = dirname(file);
  const cluster = known<ClusterEntry>(rawCluster, CLUSTER_FIELDS, baseDir);
  const user = known<UserEntry>(rawUser, USER_FIELDS, baseDir);
  if (!cluster?.server || !user) return undefined;
  return new StaticCredentials(cluster, user);
}

/** The pod's service account, as client-node's `loadFromCluster` reads it. */
export function inClusterCredentials(
  env: NodeJS.ProcessEnv,
  accountDir = SERVICE_ACCOUNT_DIR,
): StaticCredentials | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  return new StaticCredentials(
    {
      server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
      caFile: join(accountDir, 'ca.crt'),
    },
    { tokenFile: join(accountDir, 'token') },
  );
}

/**
 * KUBECONFIG (a single file), else ~/.kube/config, else the in-cluster service account; whatever
 * this module does not read itself is loaded by client-node's `loadFromDefault`, which looks in the
 * same places in the same order.
 */
export async function loadKubeCredentials(
  env: NodeJS.ProcessEnv = process.env,
  options: { home?: string; accountDir?: string } = {},
): Promise<KubeCredentials> {
  const files = (env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
  const home = options.home ?? (env.HOME || homedir());
  const accountDir = options.accountDir ?? SERVICE_ACCOUNT_DIR;
  let simple: KubeCredentials | undefined;
  if (files.length === 1) simple = readSimpleKubeconfig(files[0] as string);
  else if (files.length === 0) {
    const userConfig = join(home, '.kube', 'config');
    const token = join(accountDir, 'token');
    if (existsSync(userConfig)) simple = readSimpleKubeconfig(userConfig);
    else if (existsSync(token)) {
      simple = inClusterCredentials(env, accountDir);
      // As client-go's in-cluster config does: fail at start, so the pod restarts and says why.
      if (!simple)
        throw new Error(
          `a service account token is at ${token}, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set (the kubelet sets them from the "kubernetes" Service)`,
        );
    } else {
      // client-node would fall back to http://localhost:8080, and every request would then fail
      // with a TLS complaint that hides the real cause.
      throw new Error(
        `no Kubernetes credentials: KUBECONFIG is not set, ${userConfig} does not exist, and there is no service account token at ${token}`,
      );
    }
  }
  if (simple) return simple;
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
