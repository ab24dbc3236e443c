/**
 * `/fn/` without the API server on the request path, against a real kube-apiserver + etcd of this
 * file's own (it is killed here): routing reads only what the watches hold, so /fn/ requests cost no
 * API request, a running function keeps answering 200 while the API server is SIGKILLed and while it
 * restarts, a function at zero answers a fast 503 with Retry-After that names the control plane, and
 * once the API server is back the caches resync by themselves and the function at zero starts again.
 *
 * The controller reaches the API server through the counting proxy of api-proxy.ts, so its requests
 * can be read; the played kubelet and EndpointSlice controller use their own client. The functions'
 * pods are a local HTTP server the route resolver is pointed at.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { apply, getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { type ApiProxy, startApiProxy } from './api-proxy.ts';
import {
  completeBuild,
  eventually,
  functionStatus,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
} from './harness.js';
import { playEndpointSlices } from './play.js';

/** A request the controller made that reads one of `names`' own objects (not a watch). */
function readsObjectOf(request: string, names: readonly string[]): boolean {
  const [method, url = ''] = request.split(' ');
  if (method !== 'GET' || /[?&]watch=(true|1)/.test(url)) return false;
  const path = url.split('?')[0] ?? '';
  return (
    names.some((name) => new RegExp(`/(functions|deployments|services)/${name}(/|$)`).test(path)) ||
    /\/endpointslices$/.test(path)
  );
}

const isWatch = (request: string) => /[?&]watch=(true|1)/.test(request);

/**
 * The API server's own count of reads of single objects (verb GET, not LIST or WATCH) of the kinds
 * the data path would read, from its `/metrics`: every client's, not only the controller's.
 */
async function apiServerObjectReads(env: KubeEnv): Promise<number> {
  const text = await env.http.raw('GET', '/metrics');
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
    if (!/(^|,)verb="GET"/.test(labels)) continue;
    if (!/(^|,)resource="(functions|deployments|services|endpointslices)"/.test(labels)) continue;
    total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

describe('kube platform: /fn/ routes from watches, through an API-server outage', () => {
  let env: KubeEnv;
  let proxy: ApiProxy;
  let repo: RemoteRepo;
  let upstream: Server;
  let system: KubeSystem;
  let stopKubelet: () => void;
  let stopEndpoints: (() => void) | undefined;
  let apiServerDown = false;
  const progress = (message: string) => process.stderr.write(`[api-outage] ${message}\n`);

  const status = (name: string) => functionStatus(env, name);
  const replicas = async (name: string) =>
    (
      (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name))?.spec as
        | { replicas?: number }
        | undefined
    )?.replicas;
  const call = async (name: string) => {
    const res = await fetch(`${system.url}/fn/${env.ns}/${name}/`);
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
  };

  /** Sends requests to `name`, `concurrency` at a time, until stopped; every answer is kept. */
  function steadyLoad(name: string, concurrency: number) {
    const answers: { phase: string; status: number; body: string }[] = [];
    let phase = 'up';
    let stopped = false;
    const workers = Array.from({ length: concurrency }, async () => {
      while (!stopped) {
        const at = phase;
        try {
          const { status: code, body } = await call(name);
          answers.push({ phase: at, status: code, body });
        } catch (error) {
          answers.push({ phase: at, status: 0, body: (error as Error).message });
        }
      }
    });
    return {
      answers,
      setPhase: (next: string) => {
        phase = next;
      },
      count: (p: string) => answers.filter((a) => a.phase === p).length,
      stop: async () => {
        stopped = true;
        await Promise.all(workers);
      },
    };
  }

  beforeAll(async () => {
    env = await kubeEnv('outage', { ownCluster: true });
    proxy = await startApiProxy(env.cluster.apiServerUrl, env.cluster.caCert, env.cluster.adminToken);
    repo = await startRemoteRepo({
      'steady/function.yaml': functionManifest('steady'),
      'steady/handler.js': nodeHandler(`return 'steady';`),
      'lazy/function.yaml': functionManifest('lazy', { scaleToZero: { idleSeconds: 1 } }),
      'lazy/handler.js': nodeHandler(`return 'lazy';`),
    });
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(
      {
        ...env.config,
        activationTimeoutMs: 20_000,
        leaderElection: { ...env.config.leaderElection, enabled: false },
      },
      {
        logger,
        kubeConfig: proxy.kubeConfig,
        originOf: () => `http://127.0.0.1:${port}`,
        pollMs: 100,
        idleSweepMs: 200,
      },
    );
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    stopEndpoints = playEndpointSlices(env.http, env.ns);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    for (const fn of ['steady', 'lazy']) await completeBuild(env, fn, commit, fn + commit);
    for (const fn of ['steady', 'lazy'])
      await eventually(`${fn} Ready`, async () => (await status(fn))?.phase === 'Ready', 30_000);
    await eventually('steady answers', async () => (await call('steady')).status === 200);
  });

  afterAll(async () => {
    // A case that failed while the API server was down must not leave the rest waiting on it.
    if (apiServerDown) await env.cluster.apiServer?.restart();
    stopEndpoints?.();
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await repo?.close();
    await proxy?.close();
    await env?.close();
  });

  it("makes no read the API server counts for 3,000 /fn/ requests, beyond an idle window's", async () => {
    // First in the file, before any case makes the control loop's reads fail (their retries would
    // read during the windows). The control loop settles: lazy scales to zero, and the reconciles
    // that follow end; then the count of reads holds still for two seconds in a row.
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    let last = -1;
    let stillSince = Date.now();
    await eventually(
      'the API server read counter holding still',
      async () => {
        const now = await apiServerObjectReads(env);
        if (now !== last) {
          last = now;
          stillSince = Date.now();
        }
        return Date.now() - stillSince >= 2000;
      },
      60_000,
    );
    // An idle window, then the load: what the played kubelet, the played EndpointSlice controller
    // and the controller read by themselves, against what they read while /fn/ is busy.
    const idleFrom = await apiServerObjectReads(env);
    const idleMs = 5000;
    await new Promise((r) => setTimeout(r, idleMs));
    const loadFrom = await apiServerObjectReads(env);
    const started = Date.now();
    const load = steadyLoad('steady', 8);
    // At least 3,000 requests and at least as long as the idle window: a read per request adds
    // thousands, and a read per second of traffic (a 1 s cache of three objects) adds fifteen or more.
    await eventually(
      '3,000 answers over 5 s or more',
      async () => load.answers.length >= 3000 && Date.now() - started >= idleMs,
      120_000,
    );
    await load.stop();
    const loadMs = Date.now() - started;
    const duringLoad = (await apiServerObjectReads(env)) - loadFrom;
    const idleReads = loadFrom - idleFrom;
    progress(
      `${load.answers.length} /fn/ requests in ${loadMs} ms: the API server counted ${duringLoad} GETs of functions, deployments, services and endpointslices; ${idleReads} in an idle window of ${idleMs} ms`,
    );
    expect(load.answers.filter((a) => a.status !== 200).slice(0, 3)).toEqual([]);
    // The control loop may read a few objects by itself (a resync, a retry): a margin of five.
    expect(duringLoad).toBeLessThanOrEqual(idleReads + 5);
  }, 300_000);

  it("answers 1,000 /fn/ requests while every read of the function's objects fails", async () => {
    // A read the data path would make (its Function, Deployment, Service, endpoints) answers 500 for
    // the whole load: a resolver that asks the API server per request answers 503s. The control
    // loop's own reads fail too meanwhile, and are retried as after any API error.
    const rule = {
      matches: (method: string, url: string) => readsObjectOf(`${method} ${url}`, ['steady']),
      remaining: Number.POSITIVE_INFINITY,
    };
    proxy.failNext(rule);
    const from = proxy.requests.length;
    const failedFrom = proxy.failed.length;
    const load = steadyLoad('steady', 4);
    await eventually('1,000 answers', async () => load.answers.length >= 1000, 60_000);
    await load.stop();
    rule.remaining = 0;
    const during = proxy.requests.slice(from);
    progress(
      `${load.answers.length} /fn/ requests: ${during.filter((r) => !isWatch(r)).length} API requests went through, ${proxy.failed.length - failedFrom} reads of steady's objects refused`,
    );
    expect(load.answers.filter((a) => a.status !== 200).slice(0, 3)).toEqual([]);
  });

  it('keeps a running function answering 200 while the API server is killed and restarted', async () => {
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    progress('lazy at zero');
    const load = steadyLoad('steady', 4);
    await eventually('load running', async () => load.count('up') >= 50);
    load.setPhase('down');
    apiServerDown = true;
    await env.cluster.apiServer?.kill();
    progress('API server killed');
    const errorsAtKill = proxy.forwardErrors();
    // The watches noticed: their re-lists failed, several times over, while /fn/ was asked meanwhile.
    await eventually(
      'watches failing against the dead API server',
      async () => proxy.forwardErrors() >= errorsAtKill + 6 && load.count('down') >= 300,
      60_000,
    );
    progress(`watches failing: ${proxy.forwardErrors() - errorsAtKill} failed API requests`);
    const cold = await call('lazy');
    load.setPhase('restarting');
    await env.cluster.apiServer?.restart();
    apiServerDown = false;
    progress('API server restarted');
    load.setPhase('back');
    // The Function cache resynced: a Function created after the restart is known to /fn/.
    await apply(
      env.http,
      { apiVersion: 'sless.dev/v1alpha1', kind: 'Function', plural: 'functions', namespaced: true },
      {
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: { name: 'late', namespace: env.ns },
        spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
      },
    );
    await eventually('late known to /fn/', async () => (await call('late')).status !== 404, 60_000);
    await eventually('load after the restart', async () => load.count('back') >= 100);
    await load.stop();
    const failed = load.answers.filter((a) => a.status !== 200);
    process.stderr.write(
      `[api-outage] steady: ${load.count('down')} sent while down, ${load.count('restarting')} while restarting, ${load.count('back')} after; ${failed.length} failed\n`,
    );
    expect(failed.slice(0, 5)).toEqual([]);
    // The function at zero could not be started: a clear, fast refusal, never a held socket.
    expect(cold.status).toBe(503);
    expect(cold.retryAfter).not.toBeNull();
    expect(cold.body).toMatch(/control plane|API server/i);
    // Once the API server is back, it starts from zero again.
    const warm = await call('lazy');
    expect(warm.status).toBe(200);
  }, 240_000);
});
