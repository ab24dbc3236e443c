// A real, throwaway control plane for tests (like controller-runtime's envtest): etcd + kube-apiserver,
// a versitygw S3 server and a docker-registry, each on free loopback ports in one temp dir.
//
//   const cluster = await startTestCluster();
//   ... cluster.kubeConfig, cluster.s3, cluster.registry ...
//   await cluster.stop();
//
// Every server runs under a small bash supervisor in its own process group. The supervisor kills its
// server and removes the temp dir if the owning Node process disappears (even by SIGKILL), so a crashed
// test run leaves nothing behind. Nothing under src/ may import this file.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';

const HERE = dirname(fileURLToPath(import.meta.url));

/** vitest provide/inject key under which global-setup.ts passes the cluster broker's URL. */
export const BROKER_KEY = 'slessTestClusterBroker';

/** Plain, serialisable connection data (what globalSetup passes to test workers). */
export interface TestClusterInfo {
  kubeconfigPath: string;
  /** The kubeconfig file's content (YAML). */
  kubeconfig: string;
  apiServerUrl: string;
  adminToken: string;
  /** PEM of the CA that signed the API server's certificate (and accepts client certificates). */
  caCert: string;
  s3: { endpoint: string; accessKeyId: string; secretAccessKey: string; region: string };
  registry: { url: string };
  /** etcd's client URL (plain HTTP on loopback), for tests that want to look under the API server. */
  etcd: { url: string };
  versions: TestClusterVersions;
}

export interface TestCluster extends TestClusterInfo {
  kubeConfig: KubeConfig;
  /** Stops every server and removes the temp dir. Idempotent. */
  stop(): Promise<void>;
  /**
   * The API server alone, for outage tests: only on a cluster the calling file owns, since killing
   * the run-wide one would break every other file's tests.
   */
  apiServer?: ApiServerControl;
}

export interface ApiServerControl {
  /** SIGKILLs kube-apiserver (etcd keeps the data) and resolves once it has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same address and data, and resolves once /readyz answers 200. */
  restart(): Promise<void>;
}

export interface TestClusterVersions {
  kubernetes: string;
  etcd: string;
  versitygw: string;
}

interface Binaries {
  KUBE_APISERVER: string;
  ETCD: string;
  VERSITYGW: string;
  DOCKER_REGISTRY: string;
}

export function readVersions(): TestClusterVersions {
  const env = parseKeyValues(readFileSync(join(HERE, 'versions.env'), 'utf8'));
  const get = (k: string): string => {
    const v = env[k];
    if (!v) throw new Error(`test/cluster/versions.env has no ${k}`);
    return v;
  };
  return {
    kubernetes: get('KUBERNETES_VERSION'),
    etcd: get('ETCD_VERSION'),
    versitygw: get('VERSITYGW_VERSION'),
  };
}

function parseKeyValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) out[m[1]] = m[2];
  }
  return out;
}

/**
 * Runs build.sh: instant when the binaries are cached, a cold build otherwise (progress on stderr).
 * Asynchronous so that a long build does not block the event loop of the process that waits for it.
 */
export async function ensureBinaries(): Promise<Binaries> {
  const { kv, stdout } = await runBuildScript();
  const bins: Binaries = {
    KUBE_APISERVER: kv.KUBE_APISERVER ?? '',
    ETCD: kv.ETCD ?? '',
    VERSITYGW: kv.VERSITYGW ?? '',
    DOCKER_REGISTRY: kv.DOCKER_REGISTRY ?? '',
  };
  for (const [k, v] of Object.entries(bins)) {
    if (!v) throw new Error(`test/cluster/build.sh did not report ${k}; output was:\n${stdout}`);
  }
  return bins;
}

/** build.sh's KEY=value report (binary paths, node images). */
export async function runBuildScript(): Promise<{ kv: Record<string, string>; stdout: string }> {
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [join(HERE, 'build.sh')], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      out += c;
    });
    child.on('error', (e) => reject(new Error(`test/cluster/build.sh could not run: ${e.message}`)));
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`test/cluster/build.sh failed (exit ${code}); see its messages above`));
    });
  });
  return { kv: parseKeyValues(stdout), stdout };
}

/** A free TCP port on 127.0.0.1 (closed again at once; the usual small race is accepted). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('no port'))));
    });
  });
}

// Runs "$@" and stays with it: forwards TERM/INT, and if the owner pid disappears, kills the server and
// removes the cluster's temp dir (unless it is ''). Exits with the server's status.
const SUPERVISOR = `
owner="$1"; root="$2"; shift 2
"$@" & child=$!
stop() { kill -TERM "$child" 2>/dev/null; wait "$child"; exit $?; }
trap stop TERM INT HUP
while kill -0 "$child" 2>/dev/null; do
  if ! kill -0 "$owner" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null
    for _ in 1 2 3 4; do kill -0 "$child" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$child" 2>/dev/null
    wait "$child"
    [ -n "$root" ] && rm -rf "$root"
    exit 1
  fi
  sleep 1 & wait $!
done
wait "$child"
`;

export interface Proc {
  name: string;
  pid: number;
  logPath: string;
  exited: Promise<number | null>;
  hasExited: () => boolean;
}

export interface ProcessOptions {
  /** Remove `root` when the owner disappears (default true; the node's janitor removes its own). */
  removeRootOnOrphan?: boolean;
  env?: Record<string, string>;
}

export function startProcess(
  root: string,
  name: string,
  bin: string,
  args: string[],
  cwd: string,
  opts: ProcessOptions = {},
): Proc {
  const logPath = join(root, `${name}.log`);
  writeFileSync(logPath, `$ ${bin} ${args.join(' ')}\n`);
  const fd = openSync(logPath, 'a');
  const child = spawn(
    'bash',
    [
      '-c',
      SUPERVISOR,
      'sless-supervisor',
      String(process.pid),
      opts.removeRootOnOrphan === false ? '' : root,
      bin,
      ...args,
    ],
    {
      cwd,
      detached: true,
      stdio: ['ignore', fd, fd],
      env: { ...process.env, GOMAXPROCS: '2', ...opts.env },
    },
  );
  closeSync(fd);
  let done = false;
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      done = true;
      resolve(code);
    });
    child.on('error', () => {
      done = true;
      resolve(null);
    });
  });
  if (child.pid === undefined) throw new Error(`could not start ${name} (${bin})`);
  return { name, pid: child.pid, logPath, exited, hasExited: () => done };
}

/** The last lines of a server's log, plus its earlier error lines (klog "E..." or "error"). */
export function logTail(p: Proc, lines = 15): string {
  let all: string[];
  try {
    all = readFileSync(p.logPath, 'utf8').split('\n');
  } catch {
    return '(no log)';
  }
  const head = all
    .slice(0, -lines)
    .filter((l) => /^[EF]\d{4} |error|fatal|panic/i.test(l))
    .slice(-20);
  return [...head, ...(head.length ? ['...'] : []), ...all.slice(-lines)].join('\n');
}

export function note(msg: string): void {
  process.stderr.write(`[test/cluster] ${msg}\n`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls check() until it returns true; fails early with the server's log if the process died. */
export async function waitFor(
  p: Proc,
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastErr = '';
  while (Date.now() < deadline) {
    if (p.hasExited()) {
      throw new Error(`${p.name} exited before ${what}. Last log lines:\n${logTail(p)}`);
    }
    try {
      if (await check()) return;
    } catch (e) {
      lastErr = e instanceof Error ? e.message : String(e);
    }
    await sleep(200);
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what} (${lastErr}). Last log lines of ${p.name}:\n${logTail(p)}`,
  );
}

/**
 * Debian's docker-registry with a config of our own (never the system service), storing under
 * `storage` and listening on `addr` (host:port); its config and log live in `root`.
 */
export function startRegistry(root: string, name: string, bin: string, storage: string, addr: string): Proc {
  const config = join(root, `${name}.yml`);
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${storage}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: ${addr}`,
      `  secret: ${randomBytes(16).toString('hex')}`,
      '',
    ].join('\n'),
  );
  return startProcess(root, name, bin, ['serve', config], root);
}

export async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await res.arrayBuffer();
  return res.ok;
}

/** GET over HTTPS trusting `ca`, with a bearer token; resolves to [status, body]. */
export function httpsGet(url: string, ca: string, token: string): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve([res.statusCode ?? 0, body]));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function openssl(cwd: string, args: string[]): void {
  const res = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (res.error)
    throw new Error(`openssl is required to make the test cluster's certificates: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${res.stderr}`);
}

/** CA, API server serving certificate and service-account signing key, with the openssl CLI. */
function makePki(dir: string, apiServerHost: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=sless-test-ca',
  ]);
  const sans = [
    'IP:127.0.0.1',
    ...(apiServerHost === '127.0.0.1' ? [] : [`IP:${apiServerHost}`]),
    'IP:10.0.0.1',
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
  ].join(',');
  /** A certificate for `name` signed by the test CA, with these X.509 extensions. */
  const signed = (name: string, subject: string, extensions: string[]) =>
    openssl(dir, [
      'req',
      '-x509',
      ...ec,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      subject,
      ...extensions.flatMap((extension) => ['-addext', extension]),
    ]);
  signed('apiserver', '/CN=kube-apiserver', [
    `subjectAltName=${sans}`,
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth',
  ]);
  // The API server's client certificate towards kubelets (logs, exec) on the real node.
  signed('kubelet-client', '/O=system:masters/CN=kube-apiserver-kubelet-client', [
    'basicConstraints=critical,CA:FALSE',
    'extendedKeyUsage=clientAuth',
  ]);
  openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'sa.key']);
  openssl(dir, ['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub']);
}

function kubeconfigYaml(server: string, caCert: string, token: string): string {
  const ca = Buffer.from(caCert).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: sless-test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${ca}`,
    'users:',
    '- name: sless-test-admin',
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: sless-test',
    '  context:',
    '    cluster: sless-test',
    '    user: sless-test-admin',
    '    namespace: default',
    'current-context: sless-test',
    '',
  ].join('\n');
}

/** A KubeConfig for an already running cluster (e.g. one started by globalSetup). */
export function kubeConfigFromInfo(info: TestClusterInfo): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(info.kubeconfig);
  return kc;
}

const live = new Set<() => void>();
let exitHooked = false;
function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', () => {
    for (const kill of live) kill();
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      for (const kill of live) kill();
      // Keep the default behaviour (die by the signal) unless someone else handles it.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    });
  }
}

export interface StartOptions {
  /** Max time for all servers to become ready (default 120 s). */
  readyTimeoutMs?: number;
  /**
   * Local address S3 and the registry listen on (default 127.0.0.1). The real node binds them to its
   * bridge's gateway address, where pods (kaniko, the kubelet's pulls) can reach them.
   */
  serveHost?: string;
  /**
   * Where the API server listens and what it advertises as the endpoint of the `kubernetes` Service
   * (default 127.0.0.1, and no endpoint is published). On the real node it is the bridge's gateway
   * address, so that pods reach the API server through that Service as in any cluster, and pods get
   * ServiceAccount tokens (the node's controller-manager creates each namespace's ServiceAccount).
   */
  apiServerHost?: string;
  /**
   * The ClusterIP range (default 10.0.0.0/24, which the real node's kube-proxy and controller-manager
   * are set up for). 254 Services at most: a benchmark with a thousand functions asks for more.
   */
  serviceCidr?: string;
}

export async function startTestCluster(opts: StartOptions = {}): Promise<TestCluster> {
  const bins = await ensureBinaries();
  const versions = readVersions();
  // Free ports are picked, released, then bound by the servers: another process can take one in
  // between. That shows as "address already in use"; try again with fresh ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(bins, versions, opts);
    } catch (e) {
      if (attempt >= 3 || !(e instanceof PortInUseError)) throw e;
      note(`a port was taken while starting (attempt ${attempt}); retrying with new ports`);
    }
  }
}

class PortInUseError extends Error {}

async function startOnce(
  bins: Binaries,
  versions: TestClusterVersions,
  opts: StartOptions,
): Promise<TestCluster> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const serveHost = opts.serveHost ?? '127.0.0.1';
  const apiServerHost = opts.apiServerHost ?? '127.0.0.1';
  const inCluster = apiServerHost !== '127.0.0.1';
  const t0 = Date.now();
  const root = mkdtempSync(join(tmpdir(), 'sless-cluster-'));
  const procs: Proc[] = [];

  const killAllSync = (): void => {
    for (const p of procs) {
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(root, { recursive: true, force: true });
  };
  live.add(killAllSync);
  hookExit();

  let stopped: Promise<void> | undefined;
  const signalAll = (sig: NodeJS.Signals): void => {
    for (const p of procs) {
      if (p.hasExited()) continue;
      try {
        process.kill(-p.pid, sig);
      } catch {
        // already gone
      }
    }
  };
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      const t = Date.now();
      const allExited = Promise.all(procs.map((p) => p.exited));
      // The data is thrown away, so graceful shutdown buys nothing; kube-apiserver sometimes takes
      // ~10 s to drain. A short grace period, then SIGKILL.
      signalAll('SIGTERM');
      await Promise.race([allExited, sleep(1500)]);
      signalAll('SIGKILL');
      await Promise.race([allExited, sleep(5000)]);
      live.delete(killAllSync);
      killAllSync();
      note(`test cluster stopped in ${Date.now() - t} ms`);
    })();
    return stopped;
  };

  try {
    const pki = join(root, 'pki');
    for (const d of ['pki', 'etcd', 's3', 'registry', 'apiserver']) mkdirSync(join(root, d));
    makePki(pki, apiServerHost);
    const caCert = readFileSync(join(pki, 'ca.crt'), 'utf8');
    const adminToken = randomBytes(24).toString('hex');
    writeFileSync(
      join(pki, 'tokens.csv'),
      `${adminToken},sless-test-admin,sless-test-admin,"system:masters"\n`,
    );

    const [etcdPort, etcdPeerPort, apiPort, s3Port, regPort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);

    // etcd: plain HTTP on loopback, no fsync (test data is thrown away).
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    const etcd = startProcess(
      root,
      'etcd',
      bins.ETCD,
      [
        '--name=default',
        `--data-dir=${join(root, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=default=${peerUrl}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      root,
    );
    procs.push(etcd);

    // S3: versitygw with the POSIX backend.
    const s3 = {
      endpoint: `http://${serveHost}:${s3Port}`,
      accessKeyId: `sless${randomBytes(6).toString('hex')}`,
      secretAccessKey: randomBytes(20).toString('hex'),
      region: 'us-east-1',
    };
    const s3Proc = startProcess(
      root,
      'versitygw',
      bins.VERSITYGW,
      [
        '--access',
        s3.accessKeyId,
        '--secret',
        s3.secretAccessKey,
        '--region',
        s3.region,
        '--port',
        `${serveHost}:${s3Port}`,
        'posix',
        join(root, 's3'),
      ],
      root,
    );
    procs.push(s3Proc);

    // Registry: Debian's docker-registry with our own config (never the system service).
    const reg = startRegistry(
      root,
      'registry',
      bins.DOCKER_REGISTRY,
      join(root, 'registry'),
      `${serveHost}:${regPort}`,
    );
    procs.push(reg);
    const registry = { url: `http://${serveHost}:${regPort}` };

    await waitFor(etcd, 'etcd /health', readyTimeoutMs, () => httpOk(`${etcdUrl}/health`));

    const apiServerUrl = `https://${apiServerHost}:${apiPort}`;
    const apiArgs = [
      `--etcd-servers=${etcdUrl}`,
      `--etcd-prefix=/sless-${randomBytes(4).toString('hex')}`,
      `--bind-address=${apiServerHost}`,
      `--advertise-address=${apiServerHost}`,
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(root, 'apiserver')}`,
      `--tls-cert-file=${join(pki, 'apiserver.crt')}`,
      `--tls-private-key-file=${join(pki, 'apiserver.key')}`,
      `--client-ca-file=${join(pki, 'ca.crt')}`,
      `--token-auth-file=${join(pki, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(pki, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
      `--service-cluster-ip-range=${opts.serviceCidr ?? '10.0.0.0/24'}`,
      '--allow-privileged=true',
      // Logs and exec go to the kubelet (only on the real node): at the node's InternalIP, with a
      // client certificate the kubelet's x509 authentication accepts.
      '--kubelet-preferred-address-types=InternalIP',
      `--kubelet-client-certificate=${join(pki, 'kubelet-client.crt')}`,
      `--kubelet-client-key=${join(pki, 'kubelet-client.key')}`,
      ...(inCluster
        ? []
        : [
            // A loopback advertise address is refused by the endpoint reconciler; nothing needs the
            // "kubernetes" Service endpoints here (envtest does the same).
            '--endpoint-reconciler-type=none',
            // No controller-manager runs, so nothing would create the default ServiceAccount pods expect.
            '--disable-admission-plugins=ServiceAccount',
          ]),
      '--v=0',
    ];
    let apiStarts = 0;
    const startApi = (): Proc => {
      const started = startProcess(
        root,
        apiStarts++ === 0 ? 'kube-apiserver' : `kube-apiserver-${apiStarts}`,
        bins.KUBE_APISERVER,
        apiArgs,
        root,
      );
      procs.push(started);
      return started;
    };
    const apiReady = (p: Proc) =>
      waitFor(p, 'kube-apiserver /readyz', readyTimeoutMs, async () => {
        const [status] = await httpsGet(`${apiServerUrl}/readyz`, caCert, adminToken);
        return status === 200;
      });
    let api = startApi();
    const apiServer: ApiServerControl = {
      kill: async () => {
        if (api.hasExited()) return;
        try {
          process.kill(-api.pid, 'SIGKILL');
        } catch {
          // already gone
        }
        await api.exited;
      },
      restart: async () => {
        api = startApi();
        await apiReady(api);
      },
    };

    await Promise.all([
      apiReady(api),
      // A 403 (unsigned request) proves the S3 server answers HTTP.
      waitFor(s3Proc, 'versitygw', readyTimeoutMs, async () => {
        const res = await fetch(s3.endpoint, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        return res.status > 0;
      }),
      waitFor(reg, 'registry /v2/', readyTimeoutMs, () => httpOk(`${registry.url}/v2/`)),
    ]);
    // The bootstrap controller creates the default namespace shortly after /readyz.
    await waitFor(api, 'namespace default', readyTimeoutMs, async () => {
      const [status] = await httpsGet(`${apiServerUrl}/api/v1/namespaces/default`, caCert, adminToken);
      return status === 200;
    });

    const kubeconfig = kubeconfigYaml(apiServerUrl, caCert, adminToken);
    const kubeconfigPath = join(root, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfig, { mode: 0o600 });
    const info: TestClusterInfo = {
      kubeconfigPath,
      kubeconfig,
      apiServerUrl,
      adminToken,
      caCert,
      s3,
      registry,
      etcd: { url: etcdUrl },
      versions,
    };
    note(
      `test cluster ready in ${Date.now() - t0} ms: ${apiServerUrl}, S3 ${s3.endpoint}, registry ${registry.url}`,
    );
    return { ...info, kubeConfig: kubeConfigFromInfo(info), stop, apiServer };
  } catch (e) {
    const portClash = procs.some((p) => /address already in use/i.test(logTail(p, 200)));
    await stop();
    if (portClash && e instanceof Error) throw new PortInUseError(e.message);
    throw e;
  }
}
