// Asynchronous invocation on kube against synchronous /fn/, the same function, requests and clients,
// as bench/async-invocations.ts has it for `sless dev`. The controller runs in this process against
// the real kube-apiserver + etcd of test/cluster (the played kubelet marks the Deployment available,
// the route is pointed at the origin, as the test/kube tests do) and a real RabbitMQ (Debian's
// rabbitmq-server, as the tests start it) whose stream journals the invocations; the function's "pod"
// is a node:http server in a child process. Sync: N POSTs to /fn/, 16 at a time. Async: N POSTs to
// /fn-async/, 16 at a time, each answered 202 once the stream confirmed its record; end to end runs
// until every invocation has ended (the leader's workers deliver 16 at a time, spec.async.concurrency).
// Reports end-to-end throughput as a ratio of the sync one, and the 202's latency (p50, p99).
// Run: npx tsc -p tsconfig.build.json && npx tsx bench/kube-async.ts   (N=1000 by default)
import { type ChildProcess, spawn } from 'node:child_process';
import { pino } from 'pino';
import { buildName } from '../src/core/naming.js';
import type { FunctionStatus } from '../src/core/resources.js';
import { startKubeSystem } from '../src/main.js';
import { getObject, type KubeObject } from '../src/platform/kube/objects.js';
import { JOB } from '../src/platform/kube/resource-types.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, git, gitSource, nodeHandler } from '../test/helpers/git.js';
import { pollUntil } from '../test/helpers/poll-until.js';
import { startRabbitMq } from '../test/helpers/rabbitmq.js';
import { startRemoteRepo } from '../test/helpers/remote-repo.js';
import { markBuildSucceeded, playHealthyKubelet } from '../test/kube/play.ts';
import { closedLoop } from './closed-loop.js';
import { benchKubeEnv } from './kube-env.ts';
import { accepts } from './net.ts';
import { report } from './report.ts';
import { ms, percentile } from './stats.ts';

const N = Number(process.env.N ?? 1000);
const CLIENTS = 16;
const logger = pino({ level: process.env.SLESS_BENCH_LOG_LEVEL ?? 'silent' });
const pause = (time: number) => new Promise((r) => setTimeout(r, time));

const eventually = (what: string, check: () => Promise<unknown>, timeoutMs = 60_000) =>
  pollUntil(what, async () => (await check()) || undefined, timeoutMs, 100);

/** The function's pod: answers every request at once, with the body it got. */
const ORIGIN = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(Buffer.concat(chunks)); });
});
server.keepAliveTimeout = 65000;
server.listen(Number(process.argv[1]), '127.0.0.1');
`;

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  try {
    const env = await benchKubeEnv('kasync');
    cleanups.unshift(() => env.close());
    const broker = await startRabbitMq();
    cleanups.unshift(() => broker.stop());
    const originPort = await freePort();
    const origin = spawn(process.execPath, ['-e', ORIGIN, String(originPort)], { stdio: 'ignore' });
    children.push(origin);
    await eventually('the function origin listens', () => accepts(originPort), 30_000);
    const repo = await startRemoteRepo({
      'echo/function.yaml': functionManifest('echo', { async: { concurrency: CLIENTS } }),
      'echo/handler.js': nodeHandler('return { ok: true };'),
    });
    cleanups.unshift(() => repo.close());
    const stopKubelet = playHealthyKubelet(env.http, env.ns);
    cleanups.unshift(stopKubelet);
    const system = await startKubeSystem(
      {
        ...env.config,
        proxyThread: false,
        leaderElection: { ...env.config.leaderElection, enabled: false },
        asyncInvocations: { amqpUrl: broker.url, stream: `sless.invocations.${env.ns}` },
      },
      {
        logger,
        kubeConfig: env.cluster.kubeConfig,
        originOf: () => `http://127.0.0.1:${originPort}`,
        pollMs: 100,
      },
    );
    cleanups.unshift(() => system.stop());
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    await eventually('build Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('echo', commit)),
    );
    await markBuildSucceeded(
      env.http,
      env.controllerNs,
      buildName('echo', commit),
      `sha256:${'0'.repeat(64)}`,
    );
    await eventually('echo Ready', async () => {
      const fn = await system.store.get('Function', env.ns, 'echo');
      return (fn?.status as FunctionStatus | undefined)?.phase === 'Ready';
    });
    const post = (path: string, n: number) =>
      fetch(`${system.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ n }),
      });
    const fnPath = `/fn/${env.ns}/echo`;
    const asyncPath = `/fn-async/${env.ns}/echo`;
    await eventually('/fn/ answers', async () => (await post(fnPath, 0)).status === 200);
    // Warm-up of both paths.
    await closedLoop(CLIENTS, 200, async (n) => void (await (await post(fnPath, n)).text()));
    await closedLoop(CLIENTS, 200, async (n) => void (await (await post(asyncPath, n)).text()));
    const open = async (state: string) => {
      const response = await fetch(
        `${system.url}/v1/namespaces/${env.ns}/invocations?state=${state}&limit=1`,
      );
      return ((await response.json()) as { items: unknown[] }).items.length;
    };
    const settled = async () => {
      while ((await open('queued')) + (await open('running')) > 0) await pause(20);
    };
    await settled();

    let started = performance.now();
    await closedLoop(CLIENTS, N, async (n) => {
      const response = await post(fnPath, n);
      if (response.status !== 200) throw new Error(`sync: ${response.status}`);
      await response.text();
    });
    const syncSeconds = (performance.now() - started) / 1000;
    const syncRate = N / syncSeconds;

    const enqueue: number[] = [];
    started = performance.now();
    await closedLoop(CLIENTS, N, async (n) => {
      const sent = performance.now();
      const response = await post(asyncPath, n);
      if (response.status !== 202) throw new Error(`async: ${response.status} ${await response.text()}`);
      await response.text();
      enqueue.push(performance.now() - sent);
    });
    const acceptedSeconds = (performance.now() - started) / 1000;
    await settled();
    const asyncSeconds = (performance.now() - started) / 1000;
    const asyncRate = N / asyncSeconds;

    const p50 = percentile(enqueue, 50);
    const p99 = percentile(enqueue, 99);
    console.log(
      `kube sync /fn/: ${N} in ${syncSeconds.toFixed(2)} s = ${syncRate.toFixed(0)} req/s\n` +
        `kube async: ${N} accepted in ${acceptedSeconds.toFixed(2)} s (${(N / acceptedSeconds).toFixed(0)}/s), ` +
        `all ended in ${asyncSeconds.toFixed(2)} s = ${asyncRate.toFixed(0)} inv/s end to end ` +
        `(ratio to sync ${(asyncRate / syncRate).toFixed(2)})\n` +
        `202 latency: p50 ${ms(p50)}, p99 ${ms(p99)}; sync /fn/ mean ${ms((syncSeconds * 1000 * CLIENTS) / N)}`,
    );
    report(
      {
        bench: 'kube-async',
        measure: 'async end-to-end throughput (RabbitMQ stream)',
        value: `${asyncRate.toFixed(0)} inv/s`,
        baseline: `sync /fn/ ${syncRate.toFixed(0)} req/s`,
        ratio: asyncRate / syncRate,
      },
      { bench: 'kube-async', measure: 'enqueue (202) p50', value: ms(p50) },
      { bench: 'kube-async', measure: 'enqueue (202) p99', value: ms(p99) },
    );
  } finally {
    for (const child of children) child.kill();
    for (const cleanup of cleanups) await cleanup();
  }
}

await main();
process.exit(0);
