/**
 * The kube controller's maximum stream duration (`SLESS_MAX_STREAM_DURATION`), against a real
 * kube-apiserver + etcd: a function's stream that keeps sending is cut at the configured maximum,
 * not at the default hour, from the main thread and from the gateway thread as the controller
 * starts it.
 *
 * The function's pods are one HTTP server here that sends an event every 100 ms until its client
 * leaves; the gateway case blocks nothing, so it may run in this process.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControllerGateway } from '../../src/cli/controller.js';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { JOB } from '../../src/platform/kube/resource-types.js';
import type { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { openStream } from '../helpers/stream-reader.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  playHealthyKubelet,
} from './harness.js';

const MAX_STREAM = '2 s';

describe.each([
  ['the main thread', false],
  ['the gateway thread', true],
])('kube platform: the maximum stream duration on %s', (_how, proxyThread) => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let pods: Server;
  let gateway: Gateway | undefined;
  let system: KubeSystem;
  let stopKubelet: () => void;
  /** Whether the pods saw each stream's client leave, by the stream's path. */
  const left = new Map<string, boolean>();
  /** The functions the main thread's resolver was asked for. */
  const resolvedOnMain: string[] = [];

  const status = async (name: string) =>
    (
      await getObject<KubeObject>(
        env.http,
        { apiVersion: 'sless.dev/v1alpha1', kind: 'Function', plural: 'functions', namespaced: true },
        env.ns,
        name,
      )
    )?.status as FunctionStatus | undefined;

  beforeAll(async () => {
    env = await kubeEnv(proxyThread ? 'streamgw' : 'streammain');
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
    await new Promise<void>((r) => pods.listen(0, '127.0.0.1', r));
    const { port } = pods.address() as AddressInfo;
    repo = await startRemoteRepo({
      'ticks/function.yaml': functionManifest('ticks'),
      'ticks/handler.js': nodeHandler(`return 'ticks';`),
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
    const resolve = system.routes.resolve.bind(system.routes);
    system.routes.resolve = (namespace, name) => {
      resolvedOnMain.push(name);
      return resolve(namespace, name);
    };
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await eventually('build Job of ticks', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('ticks', commit)),
    );
    await markBuildSucceeded(env.http, env.controllerNs, buildName('ticks', commit), fakeDigest(commit));
    await eventually('ticks Ready', async () => (await status('ticks'))?.phase === 'Ready', 30_000);
    await eventually(
      proxyThread ? 'ticks served by the thread' : 'ticks answers',
      async () => {
        const before = resolvedOnMain.length;
        const res = await fetch(`${system.url}/fn/${env.ns}/ticks/`);
        await res.text();
        return res.status === 200 && (!proxyThread || resolvedOnMain.length === before);
      },
      30_000,
    );
  }, 120_000);

  afterAll(async () => {
    stopKubelet?.();
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
});
