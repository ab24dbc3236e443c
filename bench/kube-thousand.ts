// A thousand functions on the kube platform, against the real kube-apiserver + etcd, S3 and registry of
// test/cluster (no node: the bench plays kaniko and the Job controller for build Jobs, and the
// Deployment controller for Deployments, with its own client, so its requests are not counted).
// The controller runs as in production, `node bin/sless.js controller` (compiled), with a kubeconfig
// that reaches the API server through a counting proxy. Measures its resident memory with FUNCTIONS
// (default 1000) Function objects Ready, beside its memory once started with none; and the API
// requests it makes for a commit that changes one function's code, and for one that changes ten:
// proportional to the change means the first is small and the second about ten times it, whatever
// the repository's size.
// Run: npx tsx bench/kube-thousand.ts   (FUNCTIONS=200 for a quicker run)
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { PACKAGE_ROOT } from '../src/config/config.js';
import type { SlessFunction } from '../src/core/resources.js';
import { KubeHttp } from '../src/platform/kube/http.js';
import { apply, type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { JOB, SECRET, slessType } from '../src/platform/kube/resource-types.js';
import { freePort } from '../src/platform/local/ports.js';
import { startTestCluster } from '../test/cluster/fixture.ts';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { startGitHttpServer } from '../test/helpers/git-http-server.js';
import { startApiProxy } from '../test/kube/api-proxy.ts';
import { createNamespace, installCrds } from '../test/kube/install.ts';
import { markBuildSucceeded, playHealthyKubelet } from '../test/kube/play.ts';
import { ensureCompiled } from './compiled.ts';
import { report } from './report.ts';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

/** Resident memory of a process, in MB, from /proc. */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.replace(/\D+/g, '') ?? 0) / 1024;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await pause(250);
  }
}

/** Plays kaniko and the Job controller: every build Job without a result succeeds. */
function playBuilds(http: KubeHttp, namespace: string): () => void {
  let stopped = false;
  const done = new Set<string>();
  void (async () => {
    while (!stopped) {
      try {
        const jobs = await listObjects<KubeObject>(http, JOB, { namespace });
        const pending = jobs.items.filter((j) => !done.has(j.metadata.name));
        for (let i = 0; i < pending.length; i += 16)
          await Promise.all(
            pending.slice(i, i + 16).map(async (job) => {
              const name = job.metadata.name;
              const digest = `sha256:${createHash('sha256').update(name).digest('hex')}`;
              await markBuildSucceeded(http, namespace, name, digest);
              done.add(name);
            }),
          );
      } catch {
        // A Job went away or the pod already exists: look again next round.
      }
      await pause(200);
    }
  })();
  return () => {
    stopped = true;
  };
}

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

const cluster = await startTestCluster();
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
  ensureCompiled();
  const controller = spawn(
    process.execPath,
    [join(PACKAGE_ROOT, 'bin', 'sless.js'), 'controller', '--host', '127.0.0.1', '--port', String(port)],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        KUBECONFIG: kubeconfig,
        SLESS_LOG_LEVEL: 'warn',
        SLESS_CONTROLLER_NAMESPACE: controllerNs,
        SLESS_WATCH_NAMESPACES: ns,
        // The default quota (200 functions per namespace) would refuse the repository.
        SLESS_QUOTA_FUNCTIONS: String(FUNCTIONS + 10),
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
  await pause(2000);
  const idle = rssMb(controller.pid ?? 0);
  cleanups.unshift(playBuilds(http, controllerNs));
  cleanups.unshift(playHealthyKubelet(http, ns, 500));
  const functions = async () =>
    (await listObjects<KubeObject>(http, slessType('Function'), { namespace: ns }))
      .items as unknown as SlessFunction[];
  /** Until no request has reached the API server for 3 s (open watches count once, when made). */
  const quiet = async () => {
    let seen = -1;
    while (seen !== apiProxy.requests.length) {
      seen = apiProxy.requests.length;
      await pause(3000);
    }
  };

  const started = performance.now();
  await apply(
    http,
    slessType('GitSource'),
    gitSource('repo', ns, `${gitServer.url}/fns.git`) as unknown as KubeObject,
  );
  const readyCount = async () => (await functions()).filter((f) => f.status?.phase === 'Ready').length;
  await until(`${FUNCTIONS} Functions Ready`, async () => (await readyCount()) === FUNCTIONS, 60 * 60_000);
  const firstSyncSeconds = (performance.now() - started) / 1000;
  await quiet();
  const loaded = rssMb(controller.pid ?? 0);
  console.log(
    `${FUNCTIONS} Functions Ready after ${firstSyncSeconds.toFixed(0)} s (first sync, builds played); ${apiProxy.requests.length} API requests so far`,
  );

  /** Commits a code change to `names`, syncs, and counts the controller's requests until they serve it. */
  const change = async (names: string[], round: number) => {
    const edits: Record<string, string> = {};
    for (const name of names)
      edits[`functions/${name}/handler.js`] = nodeHandler(`return '${name} v${round}';`);
    const sha = await work.commit(edits, `change ${names.length}`);
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const from = apiProxy.requests.length;
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
    );
    await quiet();
    return apiProxy.requests.slice(from);
  };
  const one = await change(['fn-0'], 1);
  const ten = await change(
    Array.from({ length: 10 }, (_, i) => `fn-${i + 1}`),
    1,
  );

  console.log(`controller resident memory (RSS):`);
  console.log(`  started, no Functions   ${idle.toFixed(0)} MB`);
  console.log(`  ${FUNCTIONS} Functions Ready   ${loaded.toFixed(0)} MB`);
  console.log(`API requests for a commit changing 1 of ${FUNCTIONS}: ${one.length}`);
  console.log(`  ${breakdown(one)}`);
  console.log(`API requests for a commit changing 10 of ${FUNCTIONS}: ${ten.length}`);
  console.log(`  ${breakdown(ten)}`);
  report(
    {
      bench: 'kube-thousand',
      measure: `controller RSS with ${FUNCTIONS} Functions`,
      value: `${loaded.toFixed(0)} MB`,
      baseline: `started with none ${idle.toFixed(0)} MB`,
      ratio: loaded / idle,
      target: '< 150 MB',
      met: loaded < 150,
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
  );
} finally {
  for (const cleanup of cleanups) await cleanup();
}
