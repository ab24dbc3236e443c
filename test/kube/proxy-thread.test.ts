/**
 * The kube controller's `/fn/` from the gateway thread, against a real kube-apiserver + etcd: an
 * always-on function answers while the main thread is blocked (so the thread served it, from a route
 * the kube route publisher told it), an autoscaled one is served there too and its requests are
 * counted where the autoscaler reads them, and a function that scales to zero still goes to the main
 * thread's resolver, which the scaler needs.
 *
 * The functions' pods are one HTTP server in a child process, which is also the client during the
 * block: nothing of it may run on the thread that is blocked.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  functionStatus,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
  recordResolves,
} from './harness.js';
import { playEndpointSlices } from './play.js';

/**
 * The pods and the client: answers `/slow` after 700 ms and anything else at once; given a URL and a
 * duration on stdin, asks it over and over, one request at a time, and prints each one's times.
 */
const CHILD = `
const http = require('node:http');
const readline = require('node:readline');
const server = http.createServer((req, res) => {
  req.resume();
  if (req.url.endsWith('/slow')) setTimeout(() => res.end('slow'), 700);
  else res.end('ok');
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  const { url, ms } = JSON.parse(line);
  const agent = new http.Agent({ keepAlive: true });
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const start = Date.now();
    const status = await new Promise((resolve) =>
      http.get(url, { agent }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); })
        .on('error', () => resolve(0)));
    console.log(JSON.stringify({ start, end: Date.now(), status }));
  }
  agent.destroy();
  console.log(JSON.stringify({ done: true }));
});
`;

interface Answer {
  start: number;
  end: number;
  status: number;
}

describe('kube platform: /fn/ from the gateway thread', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let gateway: Gateway;
  let system: KubeSystem;
  let child: ChildProcessWithoutNullStreams;
  let stopKubelet: () => void;
  let stopEndpoints: (() => void) | undefined;
  const lines: Array<Record<string, unknown>> = [];
  /** The functions the main thread's resolver was asked for. */
  const resolvedOnMain: string[] = [];

  const status = (name: string) => functionStatus(env, name);

  const call = async (name: string, path = '') => {
    const res = await fetch(`${system.url}/fn/${env.ns}/${name}/${path}`);
    return { status: res.status, body: await res.text() };
  };

  beforeAll(async () => {
    env = await kubeEnv('gwthread');
    child = spawn(process.execPath, ['-e', CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(JSON.parse(line)));
    await eventually('the pods listening', async () => lines.some((l) => typeof l.port === 'number'));
    const port = lines.find((l) => typeof l.port === 'number')?.port as number;
    repo = await startRemoteRepo({
      'steady/function.yaml': functionManifest('steady'),
      'steady/handler.js': nodeHandler(`return 'steady';`),
      'scaled/function.yaml': functionManifest('scaled', { scale: { min: 1, max: 3, target: 10 } }),
      'scaled/handler.js': nodeHandler(`return 'scaled';`),
      'lazy/function.yaml': functionManifest('lazy', { scaleToZero: { idleSeconds: 600 } }),
      'lazy/handler.js': nodeHandler(`return 'lazy';`),
    });
    gateway = await Gateway.start('127.0.0.1', 0);
    system = await startKubeSystem(
      { ...env.config, leaderElection: { ...env.config.leaderElection, enabled: false } },
      {
        logger,
        kubeConfig: env.cluster.kubeConfig,
        originOf: () => `http://127.0.0.1:${port}`,
        pollMs: 100,
        listener: gateway,
        gateway,
      },
    );
    recordResolves(system, resolvedOnMain);
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    stopEndpoints = playEndpointSlices(env.http, env.ns, { everyMs: 200 });
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    for (const fn of ['steady', 'scaled', 'lazy']) await completeBuild(env, fn, commit, fn + commit);
    for (const fn of ['steady', 'scaled', 'lazy'])
      await eventually(`${fn} Ready`, async () => (await status(fn))?.phase === 'Ready', 30_000);
    for (const fn of ['steady', 'scaled', 'lazy'])
      await eventually(`${fn} answers`, async () => (await call(fn)).status === 200, 30_000);
  }, 120_000);

  afterAll(async () => {
    stopEndpoints?.();
    stopKubelet?.();
    child?.kill();
    await system?.stop();
    await repo?.close();
    await env?.close();
  });

  it('answers an always-on function while the main thread is blocked, without asking its resolver', async () => {
    // Once the thread has the route, the main thread's resolver is asked nothing for it.
    await eventually(
      'steady served by the thread',
      async () => {
        const before = resolvedOnMain.length;
        return (await call('steady')).status === 200 && resolvedOnMain.length === before;
      },
      10_000,
    );
    const from = resolvedOnMain.length;
    const first = lines.length;
    child.stdin.write(`${JSON.stringify({ url: `${system.url}/fn/${env.ns}/steady/`, ms: 2500 })}\n`);
    await eventually('the load running', async () => lines.length > first + 5);
    // The main thread can do nothing for a second: no event loop, no resolver, no proxy.
    const blockedAt = Date.now();
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    const unblockedAt = Date.now();
    await eventually('the load done', async () => lines.slice(first).some((l) => l.done === true), 10_000);
    const answers = lines.slice(first).filter((l) => typeof l.start === 'number') as unknown as Answer[];
    const whileBlocked = answers.filter((a) => a.start >= blockedAt && a.end <= unblockedAt);
    process.stderr.write(
      `[proxy-thread] ${answers.length} requests; ${whileBlocked.length} sent and answered while the main thread was blocked for ${unblockedAt - blockedAt} ms\n`,
    );
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(whileBlocked.length).toBeGreaterThanOrEqual(10);
    expect(resolvedOnMain.slice(from).filter((name) => name === 'steady')).toEqual([]);
  }, 30_000);

  it('serves an autoscaled function on the thread, counting its requests where the autoscaler reads them', async () => {
    await eventually(
      'scaled served by the thread',
      async () => {
        const before = resolvedOnMain.length;
        return (await call('scaled')).status === 200 && resolvedOnMain.length === before;
      },
      10_000,
    );
    const from = resolvedOnMain.length;
    const slow = call('scaled', 'slow');
    await eventually('one in flight', async () => system.autoscaler.inflightOf(env.ns, 'scaled') === 1, 5000);
    expect(await slow).toEqual({ status: 200, body: 'slow' });
    // Released as the thread finishes the answer, a moment after the client has it.
    await eventually(
      'none in flight',
      async () => system.autoscaler.inflightOf(env.ns, 'scaled') === 0,
      5000,
    );
    expect(resolvedOnMain.slice(from)).toEqual([]);
  });

  it('hands a function that scales to zero to the main thread, where the scaler sees its requests', async () => {
    const from = resolvedOnMain.length;
    expect(await call('lazy')).toEqual({ status: 200, body: 'ok' });
    expect(resolvedOnMain.slice(from)).toEqual(['lazy']);
  });

  it('takes the route back when the Function is deleted: its requests go to the main thread, which knows it no more', async () => {
    await system.store.delete('Function', env.ns, 'steady');
    await eventually('steady unknown', async () => (await call('steady')).status === 404, 30_000);
    const from = resolvedOnMain.length;
    expect((await call('steady')).status).toBe(404);
    expect(resolvedOnMain.slice(from)).toEqual(['steady']);
  });
});
