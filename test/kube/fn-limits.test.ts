/**
 * The kube controller's limits on `/fn/`, against a real kube-apiserver + etcd, from the main thread
 * and from the gateway thread as the controller starts it: a stream that keeps sending is cut at the
 * maximum stream duration (`SLESS_MAX_STREAM_DURATION`), not at the default hour, and an open
 * WebSocket holds a slot of its function's concurrency limit, so that the next one waits and the
 * one over the queue is a 503.
 *
 * The functions' pods are one HTTP server here that sends an event every 100 ms until its client
 * leaves and accepts WebSockets with `ws`; the gateway case blocks nothing, so it may run in this
 * process.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { startControllerGateway } from '../../src/cli/controller.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import type { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { openStream } from '../helpers/stream-reader.js';
import { upgradeStatus } from '../helpers/upgrade-status.js';
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

const MAX_STREAM = '2 s';

describe.each([
  ['the main thread', false],
  ['the gateway thread', true],
])('kube platform: /fn/ limits on %s', (_how, proxyThread) => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let pods: Server;
  let wss: WebSocketServer;
  let upgradesAsked = 0;
  let gateway: Gateway | undefined;
  let system: KubeSystem;
  let stopKubelet: () => void;
  /** Whether the pods saw each stream's client leave, by the stream's path. */
  const left = new Map<string, boolean>();
  /** The functions the main thread's resolver was asked for. */
  const resolvedOnMain: string[] = [];

  const status = (name: string) => functionStatus(env, name);

  beforeAll(async () => {
    env = await kubeEnv(proxyThread ? 'streamgw' : 'streammain');
    wss = new WebSocketServer({ noServer: true });
    pods = createServer((req, res) => {
      req.resume();
      if (!req.url?.includes('/forever')) return void res.end('ok');
      const path = req.url;
      left.set(path, false);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const tick = setInterval(() => res.write('data: tick\n\n'), 100);
      res.on('close', () => {
        clearInterval(tick);
        left.set(path, true);
      });
    });
    pods.on('upgrade', (req, socket, head) => {
      upgradesAsked++;
      wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data) => ws.send(String(data))));
    });
    await new Promise<void>((r) => pods.listen(0, '127.0.0.1', r));
    const { port } = pods.address() as AddressInfo;
    repo = await startRemoteRepo({
      'ticks/function.yaml': functionManifest('ticks'),
      'ticks/handler.js': nodeHandler(`return 'ticks';`),
      'limited/function.yaml': functionManifest('limited', { scale: { concurrency: 1, queue: 1 } }),
      'limited/handler.js': nodeHandler(`return 'limited';`),
    });
    const config = {
      ...env.config,
      maxStreamSeconds: 2,
      proxyThread,
      leaderElection: { ...env.config.leaderElection, enabled: false },
    };
    gateway = proxyThread ? await startControllerGateway(config) : undefined;
    system = await startKubeSystem(config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
      ...(gateway ? { listener: gateway, gateway } : {}),
    });
    recordResolves(system, resolvedOnMain);
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    for (const fn of ['ticks', 'limited']) await completeBuild(env, fn, commit, fn + commit);
    for (const fn of ['ticks', 'limited']) {
      await eventually(`${fn} Ready`, async () => (await status(fn))?.phase === 'Ready', 30_000);
      await eventually(
        proxyThread ? `${fn} served by the thread` : `${fn} answers`,
        async () => {
          const before = resolvedOnMain.length;
          const res = await fetch(`${system.url}/fn/${env.ns}/${fn}/`);
          await res.text();
          return res.status === 200 && (!proxyThread || resolvedOnMain.length === before);
        },
        30_000,
      );
    }
  }, 120_000);

  afterAll(async () => {
    stopKubelet?.();
    for (const ws of wss?.clients ?? []) ws.terminate();
    pods?.closeAllConnections();
    await new Promise((r) => pods?.close(r));
    await system?.stop();
    await repo?.close();
    await env?.close();
  });

  it(`cuts a stream that keeps sending at ${MAX_STREAM}, and the function sees its client leave`, async () => {
    const from = resolvedOnMain.length;
    const path = `/forever?case=${proxyThread ? 'gateway' : 'main'}`;
    const started = Date.now();
    const stream = await openStream(`${system.url}/fn/${env.ns}/ticks${path}`);
    try {
      expect(stream.status).toBe(200);
      await stream.until('data: tick\n\n');
      // Cut, not ended: the status went out with the stream. Far sooner than the default hour.
      const cut = await Promise.race([
        stream.ended().then(
          () => 'ended',
          () => 'cut',
        ),
        new Promise<string>((r) => setTimeout(() => r('still open after 10 s'), 10_000)),
      ]);
      const lasted = Date.now() - started;
      expect(cut).toBe('cut');
      expect(lasted).toBeGreaterThanOrEqual(1900);
      expect(stream.received().split('data: tick\n\n').length).toBeGreaterThan(5);
      await eventually(
        'the pod sees its client leave',
        async () => [...left].some(([seen, gone]) => seen.endsWith(path) && gone),
        5000,
      );
      // The thread that was meant to serve it did.
      if (proxyThread) expect(resolvedOnMain.slice(from)).toEqual([]);
    } finally {
      stream.leave();
    }
  }, 30_000);

  it('counts an open WebSocket against the concurrency limit: the next waits for it, one over the queue is a 503', async () => {
    const from = resolvedOnMain.length;
    const url = `${system.url}/fn/${env.ns}/limited/`;
    const first = await openSocket(url.replace(/^http/, 'ws'));
    const asked = upgradesAsked;
    // concurrency 1 (one pod), queue 1: the next upgrade waits without reaching the pod.
    const second = openSocket(url.replace(/^http/, 'ws'));
    const settled = await Promise.race([
      second.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 500)),
    ]);
    expect(settled).toBe(false);
    expect(upgradesAsked).toBe(asked);
    const over = await upgradeStatus(url);
    expect(over.status).toBe(503);
    expect(over.body).toContain(`function ${env.ns}/limited is at its concurrency limit`);
    first.close();
    const admitted = await second;
    expect(upgradesAsked).toBe(asked + 1);
    admitted.close();
    if (proxyThread) expect(resolvedOnMain.slice(from)).toEqual([]);
  });
});

/** Opens a WebSocket and resolves once it is open. */
function openSocket(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.addEventListener('open', () => resolve(ws));
    ws.addEventListener('error', () => reject(new Error('the upgrade failed')));
  });
}
