// A thousand functions on the kube platform, against the real kube-apiserver + etcd, S3 and registry of
// test/cluster (no node: the bench plays kaniko and the Job controller for build Jobs, and the
// Deployment controller for Deployments, from watches with its own client, so its requests are not
// counted). The controller runs as in production, `node bin/sless.js controller` (compiled), with a
// kubeconfig that reaches the API server through a counting proxy. Measures its memory (RSS, and the
// V8 heap after a full collection) once started with no Functions and with FUNCTIONS (default 1000)
// Function objects Ready; and the API requests it makes for a commit that changes one function's
// code, and for one that changes ten: proportional to the change means the first is small and the
// second about ten times it, whatever the repository's size. Then a commit that changes CHANGED
// (default 200) functions whose builds take BUILD_MS (default 5 s) each: its time from the sync to all
// of them Ready, beside what the builds alone need (BUILD_MS per round of the kube platform's 32 build
// slots), and its API requests and Function status writes per changed function. Lease renewals
// (leader election, every few seconds whatever happens) are counted apart.
// Run: npx tsx bench/kube-thousand.ts   (FUNCTIONS=30 for a quick run; SLESS_BENCH_HEAP_SNAPSHOT=1
// also writes a heap snapshot of the controller at the end, named in the output;
// SLESS_BENCH_LOG_LEVEL=info shows its log; SLESS_BENCH_NODE_OPTIONS replaces the node options of
// deploy/Dockerfile, SLESS_BENCH_CONTROLLER_ENV adds `NAME=value …` to the controller's environment,
// e.g. LD_PRELOAD for another malloc or a native allocation profiler; SLESS_BENCH_FIRST_SYNC_ONLY=1
// stops after the memory figure of the first sync, for quicker experiments)
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { PACKAGE_ROOT } from '../src/config/config.js';
import type { SlessFunction } from '../src/core/resources.js';
import { KubeHttp } from '../src/platform/kube/http.js';
import { apply, type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { collectionPath, DEPLOYMENT, JOB, SECRET, slessType } from '../src/platform/kube/resource-types.js';
import { watchCollection } from '../src/platform/kube/watch.js';
import { freePort } from '../src/platform/local/ports.js';
import { startTestCluster } from '../test/cluster/fixture.ts';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { startGitHttpServer } from '../test/helpers/git-http-server.js';
import { startApiProxy } from '../test/kube/api-proxy.ts';
import { createNamespace, installCrds } from '../test/kube/install.ts';
import { deploymentLags, markBuildSucceeded, markDeploymentAvailable } from '../test/kube/play.ts';
import { ensureCompiled } from './compiled.ts';
import { cpuSeconds } from './proc-stat.ts';
import { report } from './report.ts';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
/** The last commit changes this many functions (CHANGED=0 leaves it out) ... */
const CHANGED = Math.min(Number(process.env.CHANGED ?? 200), FUNCTIONS);
/** ... and each of its builds takes this long, as kaniko would; the other commits' builds end at once. */
const BUILD_MS = Number(process.env.BUILD_MS ?? 5000);
/** The kube platform's build slots (src/main.ts): the time the builds alone need is set by them. */
const KUBE_BUILD_SLOTS = 32;
const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

/** Resident memory of a process, in MB, from /proc. */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.replace(/\D+/g, '') ?? 0) / 1024;
}

/**
 * Where a process's resident memory is, in MB, from /proc/PID/smaps: glibc's main malloc arena
 * (`[heap]`), other anonymous mappings (V8's heap, other malloc arenas, large buffers), and mapped files
 * (node's binary, shared libraries).
 */
function residentBreakdown(pid: number): { mallocHeap: number; anonymous: number; files: number } {
  const sums = { mallocHeap: 0, anonymous: 0, files: 0 };
  let into: keyof typeof sums = 'anonymous';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const name = mapping[1] ?? '';
      into = name === '[heap]' ? 'mallocHeap' : name === '' || name.startsWith('[') ? 'anonymous' : 'files';
    } else if (line.startsWith('Rss:')) sums[into] += Number(line.replace(/\D+/g, '')) / 1024;
  }
  return sums;
}

/**
 * How the controller image starts node: the options between `node` and `bin/sless.js` in
 * deploy/Dockerfile's ENTRYPOINT, and its malloc environment (MALLOC_*, GLIBC_TUNABLES, LD_PRELOAD), so
 * the bench measures what ships. SLESS_BENCH_NODE_OPTIONS (space-separated) replaces the options, and
 * SLESS_BENCH_CONTROLLER_ENV (`NAME=value` pairs, space-separated) adds to the environment, to measure
 * others.
 */
function shippedNode(): { options: string[]; env: Record<string, string> } {
  const dockerfile = readFileSync(join(PACKAGE_ROOT, 'deploy', 'Dockerfile'), 'utf8');
  const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)?.[1];
  if (!entrypoint) throw new Error('deploy/Dockerfile: no ENTRYPOINT ["node", …]');
  const argv = JSON.parse(entrypoint) as string[];
  const options = process.env.SLESS_BENCH_NODE_OPTIONS?.split(' ').filter(Boolean) ?? argv.slice(1, -1);
  const env: Record<string, string> = {};
  for (const [, name, value] of dockerfile.matchAll(/^ENV (MALLOC_\w+|GLIBC_TUNABLES|LD_PRELOAD)=(\S+)$/gm))
    if (name && value) env[name] = value;
  for (const pair of process.env.SLESS_BENCH_CONTROLLER_ENV?.split(' ').filter(Boolean) ?? []) {
    const [name = '', ...value] = pair.split('=');
    env[name] = value.join('=');
  }
  return { options, env };
}

async function until(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  everyMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await pause(everyMs);
  }
}

/**
 * Calls `onObject` for every object of the collection at `path`, now and whenever one is added or
 * modified, with at most `parallel` calls running. A watch, not a list every few hundred ms: listing
 * a thousand Jobs that often loads the API server more than the controller being measured does.
 * Returns the function that stops it.
 */
function onEveryObject(
  http: KubeHttp,
  path: string,
  onObject: (object: KubeObject) => Promise<void>,
  parallel = 16,
): () => void {
  let stopped = false;
  let abort: AbortController | undefined;
  let running = 0;
  const waiting: KubeObject[] = [];
  const next = () => {
    while (!stopped && running < parallel && waiting.length > 0) {
      const object = waiting.shift() as KubeObject;
      running++;
      onObject(object)
        // The object went away or changed meanwhile: its next event brings it back.
        .catch(() => undefined)
        .finally(() => {
          running--;
          next();
        });
    }
  };
  const take = (object: KubeObject) => {
    waiting.push(object);
    next();
  };
  void (async () => {
    while (!stopped) {
      try {
        const list = await http.request<{ metadata: { resourceVersion: string }; items: KubeObject[] }>(
          'GET',
          path,
        );
        for (const item of list.items) take(item);
        abort = new AbortController();
        if (stopped) abort.abort();
        await watchCollection(
          http,
          path,
          { resourceVersion: list.metadata.resourceVersion },
          (phase, object) => {
            if (phase === 'ADDED' || phase === 'MODIFIED') take(object);
          },
          abort.signal,
        );
      } catch {
        await pause(500);
      }
    }
  })();
  return () => {
    stopped = true;
    abort?.abort();
  };
}

/**
 * Plays kaniko and the Job controller: every build Job without a result succeeds, `buildMs()` after
 * it was first seen (a timer, so that slow builds do not hold the watch's handling of the others).
 */
function playBuilds(http: KubeHttp, namespace: string, buildMs: () => number): () => void {
  const started = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const succeed = async (name: string) => {
    const digest = `sha256:${createHash('sha256').update(name).digest('hex')}`;
    await markBuildSucceeded(http, namespace, name, digest).catch((error: unknown) => {
      started.delete(name);
      throw error;
    });
  };
  const stop = onEveryObject(http, collectionPath(JOB, namespace), async (job) => {
    const name = job.metadata.name;
    if (started.has(name) || (job.status as { completionTime?: string } | undefined)?.completionTime) return;
    started.add(name);
    const delay = buildMs();
    if (delay <= 0) return succeed(name);
    const timer = setTimeout(() => {
      timers.delete(timer);
      // Tried again once: a reset connection must not leave a build running for ever.
      succeed(name).catch(() => succeed(name).catch(() => undefined));
    }, delay);
    timers.add(timer);
  });
  return () => {
    for (const timer of timers) clearTimeout(timer);
    stop();
  };
}

/** Plays the Deployment controller and a healthy kubelet: every Deployment rolls out at once. */
function playRollouts(http: KubeHttp, namespace: string): () => void {
  return onEveryObject(http, collectionPath(DEPLOYMENT, namespace), async (deployment) => {
    if (deploymentLags(deployment))
      await markDeploymentAvailable(http, namespace, deployment.metadata.name, deployment);
  });
}

/** Leader election renews its Lease every few seconds, commit or not: counted apart. */
const isLease = (request: string) => request.includes('/apis/coordination.k8s.io/');

/** `GET functions`, `PATCH deployments`…: method and resource, without names and queries. */
function kindOf(request: string): string {
  const [method = '', url = ''] = request.split(' ');
  const path = url.split('?')[0] ?? '';
  const watch = /[?&]watch=(true|1)/.test(url) ? ' (watch)' : '';
  const parts = path.split('/').filter(Boolean);
  // /api/v1/namespaces/ns/kind/name[/sub] or /apis/group/version/namespaces/ns/kind/name[/sub]
  const base = parts[0] === 'api' ? 2 : 3;
  const rest = parts.slice(base);
  const resource = rest[0] === 'namespaces' && rest.length > 2 ? rest.slice(2) : rest;
  const sub = resource.length > 2 ? `/${resource[2]}` : '';
  return `${method} ${resource[0] ?? path}${sub}${watch}`;
}

function breakdown(requests: string[]): string {
  const counts = new Map<string, number>();
  for (const r of requests) counts.set(kindOf(r), (counts.get(kindOf(r)) ?? 0) + 1);
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
}

/**
 * Requests `from`..`to` of the proxy (Lease renewals left out) by kind, with the bytes of their answers:
 * what the controller had to read, and so to parse and hold at once; then the largest single answers.
 */
function traffic(requests: string[], answerBytes: number[], from: number, to: number): string {
  const byKind = new Map<string, { count: number; bytes: number }>();
  const largest: Array<{ request: string; bytes: number }> = [];
  for (let i = from; i < to; i++) {
    const request = requests[i] ?? '';
    if (isLease(request)) continue;
    const bytes = answerBytes[i] ?? 0;
    const kind = byKind.get(kindOf(request)) ?? { count: 0, bytes: 0 };
    kind.count++;
    kind.bytes += bytes;
    byKind.set(kindOf(request), kind);
    if (!request.includes('watch=')) largest.push({ request, bytes });
  }
  const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
  const kinds = [...byKind]
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .map(([kind, { count, bytes }]) => `${count} ${kind} ${mb(bytes)} MB`)
    .join(', ');
  const top = largest
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 5)
    .map(({ request, bytes }) => `${request.slice(0, 140)} ${mb(bytes)} MB`)
    .join('\n    ');
  return `  by kind (answers): ${kinds}\n  largest answers:\n    ${top}`;
}

/** The process's peak resident memory so far (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  return Number(line?.replace(/\D+/g, '') ?? 0) / 1024;
}

/** Thrown to stop after the first sync's figure (SLESS_BENCH_FIRST_SYNC_ONLY=1), cleaning up as at the end. */
const firstSyncOnly = new Error('stopped after the first sync');
// A Service per function: the default range holds 254.
const cluster = await startTestCluster({ serviceCidr: '10.96.0.0/16' });
const cleanups: Array<() => Promise<void> | void> = [() => cluster.stop()];
try {
  const http = new KubeHttp(cluster.kubeConfig);
  await installCrds(http);
  const ns = 'bench-fns';
  const controllerNs = 'bench-sys';
  await createNamespace(http, ns);
  await createNamespace(http, controllerNs);
  const registryHost = cluster.registry.url.replace(/^https?:\/\//, '');
  for (const [name, user] of [
    ['sless-registry-pull', 'puller'],
    ['sless-registry-push', 'pusher'],
  ] as const)
    await apply(http, SECRET, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: controllerNs },
      type: 'kubernetes.io/dockerconfigjson',
      data: {
        '.dockerconfigjson': Buffer.from(
          JSON.stringify({
            auths: { [registryHost]: { auth: Buffer.from(`${user}:pw`).toString('base64') } },
          }),
        ).toString('base64'),
      },
    });
  const s3 = new S3Client({
    endpoint: cluster.s3.endpoint,
    region: cluster.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: cluster.s3.accessKeyId, secretAccessKey: cluster.s3.secretAccessKey },
  });
  await s3.send(new CreateBucketCommand({ Bucket: 'bench' }));
  s3.destroy();
  const stateDir = await tempDir('bench-kube-state');
  const env = {
    SLESS_REGISTRY: registryHost,
    SLESS_REGISTRY_INSECURE: 'true',
    SLESS_S3_ENDPOINT: cluster.s3.endpoint,
    SLESS_S3_BUCKET: 'bench',
    SLESS_S3_REGION: cluster.s3.region,
    AWS_ACCESS_KEY_ID: cluster.s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: cluster.s3.secretAccessKey,
    SLESS_EXTERNAL_URL: 'http://sless.bench',
    SLESS_STATE_DIR: stateDir,
    SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
  };
  cleanups.push(() => rm(stateDir, { recursive: true, force: true }));

  const root = await tempDir('bench-kube-git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const gitServer = await startGitHttpServer(root);
  cleanups.push(() => gitServer.close());
  const files: Record<string, string> = {};
  for (let i = 0; i < FUNCTIONS; i++) {
    files[`functions/fn-${i}/function.yaml`] = functionManifest(`fn-${i}`);
    files[`functions/fn-${i}/handler.js`] = nodeHandler(`return 'fn-${i}';`);
  }
  const work = await TestRepo.create(files);
  cleanups.push(() => work.remove());
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');

  const apiProxy = await startApiProxy(cluster.apiServerUrl, cluster.caCert, cluster.adminToken);
  cleanups.push(() => apiProxy.close());

  const kubeconfig = join(stateDir, 'kubeconfig');
  writeFileSync(kubeconfig, apiProxy.kubeConfig.exportConfig());
  const port = await freePort();
  const memoryFile = join(stateDir, 'memory.json');
  ensureCompiled();
  const shipped = shippedNode();
  console.log(
    `controller: node ${[...shipped.options, ...Object.entries(shipped.env).map(([k, v]) => `${k}=${v}`)].join(' ') || '(no options)'}`,
  );
  const controller = spawn(
    process.execPath,
    [
      ...shipped.options,
      '--expose-gc',
      '--import',
      join(PACKAGE_ROOT, 'bench', 'memory-probe.mjs'),
      join(PACKAGE_ROOT, 'bin', 'sless.js'),
      'controller',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ],
    {
      stdio: ['ignore', process.env.SLESS_BENCH_LOG_LEVEL ? 'inherit' : 'ignore', 'inherit'],
      env: {
        ...process.env,
        KUBECONFIG: kubeconfig,
        SLESS_LOG_LEVEL: process.env.SLESS_BENCH_LOG_LEVEL ?? 'warn',
        SLESS_CONTROLLER_NAMESPACE: controllerNs,
        SLESS_WATCH_NAMESPACES: ns,
        // The default quotas (200 functions and 50 processes per namespace) would refuse the repository.
        SLESS_QUOTA_FUNCTIONS: String(FUNCTIONS + 10),
        SLESS_QUOTA_PROCESSES: String(FUNCTIONS + 10),
        SLESS_BENCH_MEMORY_FILE: memoryFile,
        ...shipped.env,
        ...env,
      },
    },
  );
  cleanups.unshift(async () => {
    if (controller.exitCode !== null) return;
    const exited = once(controller, 'exit');
    controller.kill('SIGTERM');
    await exited;
  });
  const api = `http://127.0.0.1:${port}/v1/namespaces/${ns}`;
  await until(
    'the controller listening',
    async () => {
      if (controller.exitCode !== null) throw new Error(`the controller exited with ${controller.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200;
    },
    120_000,
  );
  const requests = () => apiProxy.requests.filter((r) => !isLease(r));
  /** Until no request (but Lease renewals) has reached the API server for 3 s. */
  const quiet = async () => {
    let seen = -1;
    while (seen !== requests().length) {
      seen = requests().length;
      await pause(3000);
    }
  };
  let probes = 0;
  /** RSS as the kernel counts it now, then the V8 heap after a full collection (the probe's answer). */
  const memory = async (when: string, snapshot = false) => {
    const pid = controller.pid ?? 0;
    const rss = rssMb(pid);
    const peak = peakRssMb(pid);
    const resident = residentBreakdown(pid);
    probes++;
    if (snapshot) writeFileSync(`${memoryFile}.snapshot`, '');
    process.kill(pid, 'SIGUSR2');
    let usage: {
      taken: number;
      heapUsed: number;
      heapTotal: number;
      rss: number;
      external?: number;
      arrayBuffers?: number;
      spaces?: Record<string, { size: number; used: number }>;
      snapshot?: string;
    } = {
      taken: 0,
      heapUsed: 0,
      heapTotal: 0,
      rss: 0,
    };
    await until(
      'the memory probe',
      async () => {
        if (existsSync(memoryFile)) usage = JSON.parse(readFileSync(memoryFile, 'utf8'));
        return usage.taken === probes;
      },
      120_000,
    );
    const mb = (bytes: number) => bytes / 1024 / 1024;
    const figures = {
      rss,
      heapUsed: mb(usage.heapUsed),
      heapTotal: mb(usage.heapTotal),
      rssAfterGc: mb(usage.rss),
    };
    console.log(
      `controller memory, ${when}: RSS ${rss.toFixed(0)} MB (peak so far ${peak.toFixed(0)} MB); after a full GC: heap used ${figures.heapUsed.toFixed(1)} MB of ${figures.heapTotal.toFixed(0)} MB, RSS ${figures.rssAfterGc.toFixed(0)} MB${usage.snapshot ? ` (heap snapshot ${usage.snapshot})` : ''}`,
    );
    const spaces = Object.entries(usage.spaces ?? {})
      .filter(([, space]) => space.size > 0)
      .map(([name, space]) => `${name} ${mb(space.used).toFixed(1)}/${mb(space.size).toFixed(1)}`)
      .join(', ');
    console.log(
      `  resident before the GC: malloc [heap] ${resident.mallocHeap.toFixed(0)} MB, other anonymous ${resident.anonymous.toFixed(0)} MB, files ${resident.files.toFixed(0)} MB; external ${mb(usage.external ?? 0).toFixed(1)} MB (array buffers ${mb(usage.arrayBuffers ?? 0).toFixed(1)} MB); V8 spaces used/size MB: ${spaces}; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    return figures;
  };
  await quiet();
  const idle = await memory('started, no Functions');
  let buildMs = 0;
  cleanups.unshift(playBuilds(http, controllerNs, () => buildMs));
  cleanups.unshift(playRollouts(http, ns));
  const functions = async () =>
    (await listObjects<KubeObject>(http, slessType('Function'), { namespace: ns }))
      .items as unknown as SlessFunction[];

  const started = performance.now();
  const cpuBefore = cpuSeconds(controller.pid ?? 0);
  const firstRequest = apiProxy.requests.length;
  await apply(
    http,
    slessType('GitSource'),
    gitSource('repo', ns, `${gitServer.url}/fns.git`) as unknown as KubeObject,
  );
  const readyCount = async () => (await functions()).filter((f) => f.status?.phase === 'Ready').length;
  let lastReport = performance.now();
  await until(
    `${FUNCTIONS} Functions Ready`,
    async () => {
      const ready = await readyCount();
      if (performance.now() - lastReport > 30_000) {
        lastReport = performance.now();
        console.log(`  ${ready} of ${FUNCTIONS} Ready after ${((lastReport - started) / 1000).toFixed(0)} s`);
      }
      return ready === FUNCTIONS;
    },
    60 * 60_000,
    // Listing a thousand Functions is work for the API server the controller shares it with.
    3000,
  );
  const firstSyncSeconds = (performance.now() - started) / 1000;
  await quiet();
  console.log(
    `${FUNCTIONS} Functions Ready after ${firstSyncSeconds.toFixed(0)} s (first sync, builds played; the controller's CPU ${(cpuSeconds(controller.pid ?? 0) - cpuBefore).toFixed(1)} s); ${requests().length} API requests so far`,
  );
  console.log(traffic(apiProxy.requests, apiProxy.answerBytes, firstRequest, apiProxy.requests.length));
  const loaded = await memory(`${FUNCTIONS} Functions Ready`);
  if (process.env.SLESS_BENCH_FIRST_SYNC_ONLY === '1') throw firstSyncOnly;

  /**
   * Commits a code change to `names`, syncs, and counts the controller's requests until they serve it;
   * `seconds` is the time from the sync request to all of them Ready at the commit.
   */
  const change = async (names: string[], round: number, seconds = { value: 0 }) => {
    const edits: Record<string, string> = {};
    for (const name of names)
      edits[`functions/${name}/handler.js`] = nodeHandler(`return '${name} v${round}';`);
    const sha = await work.commit(edits, `change ${names.length}`);
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const from = apiProxy.requests.length;
    const leasesBefore = apiProxy.requests.filter(isLease).length;
    const syncedAt = performance.now();
    const sync = await fetch(`${api}/sources/repo/sync`, { method: 'POST' });
    if (sync.status >= 300) throw new Error(`sync: ${sync.status} ${await sync.text()}`);
    await until(
      `${names.length} changed functions Ready at ${sha.slice(0, 7)}`,
      async () => {
        const byName = new Map((await functions()).map((f) => [f.metadata.name, f]));
        return names.every((name) => {
          const status = byName.get(name)?.status;
          return status?.phase === 'Ready' && status.commit === sha;
        });
      },
      10 * 60_000,
      1000,
    );
    seconds.value = (performance.now() - syncedAt) / 1000;
    await quiet();
    const made = apiProxy.requests.slice(from);
    console.log(
      `  (meanwhile ${apiProxy.requests.filter(isLease).length - leasesBefore} Lease renewals, not counted)`,
    );
    return made.filter((r) => !isLease(r));
  };
  const one = await change(['fn-0'], 1);
  const ten = await change(
    Array.from({ length: 10 }, (_, i) => `fn-${i + 1}`),
    1,
  );

  // A large commit with builds that take a while: its time to all Ready beside what the builds alone
  // need (BUILD_MS for each round of KUBE_BUILD_SLOTS builds), and what it costs per changed function.
  const wide = { value: 0 };
  let large: string[] = [];
  if (CHANGED > 0) {
    buildMs = BUILD_MS;
    large = await change(
      Array.from({ length: CHANGED }, (_, i) => `fn-${FUNCTIONS - 1 - i}`),
      2,
      wide,
    );
    buildMs = 0;
  }
  const buildsAloneSeconds = (BUILD_MS / 1000) * Math.ceil(CHANGED / KUBE_BUILD_SLOTS);
  const statusWrites = large.filter((r) => /^PATCH \S*\/functions\/[^/?]+\/status/.test(r)).length;

  // Idle for a minute after the commits (V8's memory reducer runs when a process goes quiet): the
  // steady state, beside the figure above, which is taken as the first sync settles.
  await quiet();
  await pause(60_000);
  const settled = await memory('idle 60 s after the commits');
  const row = (what: string, m: typeof idle) =>
    `  ${what.padEnd(24)} RSS ${m.rss.toFixed(0).padStart(4)} MB   heap used after GC ${m.heapUsed.toFixed(1).padStart(6)} MB`;
  console.log('controller memory:');
  console.log(row('started, no Functions', idle));
  console.log(row(`${FUNCTIONS} Functions Ready`, loaded));
  console.log(row('idle 60 s after commits', settled));
  if (process.env.SLESS_BENCH_HEAP_SNAPSHOT === '1') await memory('after the two commits', true);
  console.log(`API requests for a commit changing 1 of ${FUNCTIONS}: ${one.length}`);
  console.log(`  ${breakdown(one)}`);
  console.log(`API requests for a commit changing 10 of ${FUNCTIONS}: ${ten.length}`);
  console.log(`  ${breakdown(ten)}`);
  if (CHANGED > 0) {
    console.log(
      `a commit changing ${CHANGED} of ${FUNCTIONS}, builds of ${BUILD_MS / 1000} s: all Ready ${wide.value.toFixed(1)} s after the sync; the builds alone need ${buildsAloneSeconds.toFixed(1)} s (${KUBE_BUILD_SLOTS} slots)`,
    );
    console.log(
      `  ${large.length} API requests (${(large.length / CHANGED).toFixed(1)} per changed function), ${statusWrites} Function status writes (${(statusWrites / CHANGED).toFixed(2)} per changed function)`,
    );
    console.log(`  ${breakdown(large)}`);
  }
  report(
    {
      bench: 'kube-thousand',
      measure: `controller RSS with ${FUNCTIONS} Functions`,
      value: `${loaded.rss.toFixed(0)} MB (heap ${loaded.heapUsed.toFixed(0)} MB)`,
      baseline: `started with none ${idle.rss.toFixed(0)} MB (heap ${idle.heapUsed.toFixed(0)} MB)`,
      ratio: loaded.rss / idle.rss,
      target: '< 150 MB',
      met: loaded.rss < 150,
    },
    {
      bench: 'kube-thousand',
      measure: `API requests, commit changing 1 of ${FUNCTIONS} functions`,
      value: String(one.length),
      baseline: `10 changed: ${ten.length}`,
      ratio: ten.length / one.length,
      target: `proportional to the change, not to the ${FUNCTIONS} functions`,
      // A request per function in the repository would put the one-function commit above this.
      met: one.length < FUNCTIONS / 10 && ten.length <= 12 * one.length,
    },
    ...(CHANGED > 0
      ? [
          {
            bench: 'kube-thousand',
            measure: `commit changing ${CHANGED} of ${FUNCTIONS}, ${BUILD_MS / 1000} s builds: sync to all Ready`,
            value: `${wide.value.toFixed(1)} s`,
            baseline: `builds alone ${buildsAloneSeconds.toFixed(1)} s`,
            ratio: wide.value / buildsAloneSeconds,
            target: 'close to the builds alone (no reconcile waits on a build or a rollout)',
            met: wide.value < 1.5 * buildsAloneSeconds,
          },
        ]
      : []),
  );
} catch (error) {
  if (error !== firstSyncOnly) throw error;
} finally {
  for (const cleanup of cleanups) await cleanup();
}
