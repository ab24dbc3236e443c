// API requests per 1,000 `/fn/` requests on the kube platform, against the real kube-apiserver + etcd,
// S3 and registry of test/cluster (no node: kaniko, the kubelet and the Deployment controller are
// played with a client of their own, so their requests are not counted). The controller runs
// in-process with a kubeconfig that reaches the API server through the counting proxy of
// test/kube/api-proxy.ts. Three functions (replicas 1) get requests round robin at RATE req/s, open
// loop; the API requests that are not watches are counted during the load, and during an idle window
// of the same length just before it. Per 1,000 /fn/ requests = (load − idle) / requests × 1000.
// Target: 0 (routing reads only what the watches hold).
// Run: npx tsx bench/fn-api-requests.ts   (RATES=100,10 by default; SECONDS_PER_RATE=10)
import { pino } from 'pino';
import { buildName } from '../src/core/naming.js';
import { startKubeSystem } from '../src/main.js';
import { getObject, type KubeObject } from '../src/platform/kube/objects.js';
import { JOB, slessType } from '../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../test/helpers/git.js';
import { startRemoteRepo } from '../test/helpers/remote-repo.js';
import { startApiProxy } from '../test/kube/api-proxy.ts';
import { markBuildSucceeded, playHealthyKubelet } from '../test/kube/play.ts';
import { benchKubeEnv } from './kube-env.ts';
import { report } from './report.ts';

const RATES = (process.env.RATES ?? '100,10').split(',').map(Number);
const SECONDS_PER_RATE = Number(process.env.SECONDS_PER_RATE ?? 10);
const FUNCTIONS = ['fn-a', 'fn-b', 'fn-c'];
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not true after ${timeoutMs} ms`);
    await pause(100);
  }
}

async function main(): Promise<void> {
  const env = await benchKubeEnv('apireq');
  const cleanups: (() => Promise<void> | void)[] = [() => env.close()];
  try {
    const { cluster, http, ns, controllerNs, config } = env;
    const proxy = await startApiProxy(cluster.apiServerUrl, cluster.caCert, cluster.adminToken);
    cleanups.unshift(() => proxy.close());
    const files: Record<string, string> = {};
    for (const fn of FUNCTIONS) {
      files[`${fn}/function.yaml`] = functionManifest(fn);
      files[`${fn}/handler.js`] = nodeHandler(`return '${fn}';`);
    }
    const repo = await startRemoteRepo(files);
    cleanups.unshift(() => repo.close());
    // The functions' pods: one local server answering for all three.
    const { createServer } = await import('node:http');
    const upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    cleanups.unshift(() => new Promise<void>((r) => upstream.close(() => r())));
    const port = (upstream.address() as { port: number }).port;
    const system = await startKubeSystem(config, {
      logger: pino({ level: process.env.SLESS_BENCH_LOG_LEVEL ?? 'silent' }),
      kubeConfig: proxy.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
    });
    cleanups.unshift(() => system.stop());
    const stopKubelet = playHealthyKubelet(http, ns);
    cleanups.unshift(stopKubelet);
    await system.store.apply(gitSource('repo', ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    for (const fn of FUNCTIONS) {
      await until(`build Job of ${fn}`, async () =>
        Boolean(await getObject<KubeObject>(http, JOB, controllerNs, buildName(fn, commit))),
      );
      await markBuildSucceeded(
        http,
        controllerNs,
        buildName(fn, commit),
        `sha256:${'0'.repeat(63)}${FUNCTIONS.indexOf(fn)}`,
      );
    }
    for (const fn of FUNCTIONS)
      await until(`${fn} Ready`, async () => {
        const o = await getObject<KubeObject>(http, slessType('Function'), ns, fn);
        return (o?.status as { phase?: string } | undefined)?.phase === 'Ready';
      });
    for (const fn of FUNCTIONS)
      await until(`${fn} answers`, async () => (await fetch(`${system.url}/fn/${ns}/${fn}/`)).status === 200);
    // Let the reconciles that followed Ready settle before anything is counted.
    await pause(3000);
    const nonWatch = (from: number) =>
      proxy.requests.slice(from).filter((r) => !/[?&]watch=(true|1)/.test(r)).length;
    for (const rate of RATES) {
      const total = rate * SECONDS_PER_RATE;
      const idleFrom = proxy.requests.length;
      await pause(SECONDS_PER_RATE * 1000);
      const idle = nonWatch(idleFrom);
      const loadFrom = proxy.requests.length;
      let failed = 0;
      const started = performance.now();
      const inflight: Promise<void>[] = [];
      for (let i = 0; i < total; i++) {
        const due = started + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await pause(wait);
        const fn = FUNCTIONS[i % FUNCTIONS.length] as string;
        inflight.push(
          fetch(`${system.url}/fn/${ns}/${fn}/`)
            .then(async (res) => {
              await res.arrayBuffer();
              if (res.status !== 200) failed++;
            })
            .catch(() => {
              failed++;
            }),
        );
      }
      await Promise.all(inflight);
      const load = nonWatch(loadFrom);
      const per1000 = ((load - idle) / total) * 1000;
      console.log(
        `${rate} req/s: ${total} /fn/ requests (${failed} failed); API requests ${load} during the load, ${idle} in an idle window as long: ${per1000.toFixed(1)} per 1,000 /fn/ requests`,
      );
      report({
        bench: 'fn-api-requests',
        measure: `API requests per 1,000 /fn/ requests at ${rate} req/s`,
        value: per1000.toFixed(1),
        baseline: `idle window ${idle}, load ${load}`,
        target: '0',
        met: per1000 <= 0.5,
      });
    }
  } finally {
    for (const cleanup of cleanups) await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
