/**
 * Scale to zero on kube against the real kube-apiserver + etcd, S3 and a git server: the `/fn/` proxy
 * holds requests for a function at zero, scales its Deployment up through the scale subresource
 * exactly once, and lets them through once an endpoint is ready; the leader scales an idle function
 * back to 0, and a cron Trigger at zero goes through /fn/. What a user sees on every platform (status at
 * zero, a commit at zero staying there, replicas taken back on opting out) is the platform contract's
 * 'scale-to-zero' case (test/platform).
 *
 * There is no kubelet, kaniko, Deployment or EndpointSlice controller here: markBuildSucceeded,
 * playHealthyKubelet and playEndpointSlices (play.ts) play their parts, and the functions' pods are a local
 * HTTP server that the route resolver is pointed at. A cron Trigger's run is played by running the
 * CronJob's own curl arguments with the host's real curl, cluster DNS played by `--connect-to`.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import { FIELD_MANAGER, type FunctionStatus, type SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { LABEL_COMPONENT, LABEL_FUNCTION } from '../../src/platform/kube/labels.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { CRONJOB, DEPLOYMENT, ENDPOINT_SLICE, JOB } from '../../src/platform/kube/resource-types.js';
import { replicasOwners } from '../../src/platform/kube/rollout.js';
import { KubeScaler } from '../../src/platform/kube/scaler.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  markPodStarted,
  playHealthyKubelet,
} from './harness.js';
import { playEndpointSlices } from './play.js';

describe('kube platform: scale to zero with /fn/ as the activator', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let upstream: Server;
  let system: KubeSystem;
  let stopKubelet: () => void;
  /** Plays the kubelet's readiness: while false, a pod that was started never turns ready. */
  let podsBecomeReady = true;
  let stopEndpoints: (() => void) | undefined;
  /** Whether the system's own scaler runs the idle scale-down (as the leader would). */
  let systemLeads = true;

  const deployment = (name: string) => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
  const replicas = async (name: string) =>
    ((await deployment(name))?.spec as { replicas?: number } | undefined)?.replicas;
  const status = async (name: string) =>
    (await system.store.get('Function', env.ns, name))?.status as FunctionStatus | undefined;
  const call = (name: string) =>
    fetch(`${system.url}/fn/${env.ns}/${name}/`).then(async (r) => [r.status, await r.text()] as const);
  /** What the played pods were asked: method, path, trigger header and body. */
  const served: { method: string; url: string; trigger: string; body: string }[] = [];
  /** The curl arguments of the CronJob's one container. */
  const cronArgs = async () => {
    const cron = await getObject<KubeObject>(env.http, CRONJOB, env.ns, 'trigger-wake');
    return (
      cron?.spec as
        | { jobTemplate: { spec: { template: { spec: { containers: { args: string[] }[] } } } } }
        | undefined
    )?.jobTemplate.spec.template.spec.containers[0]?.args;
  };

  /**
   * Waits for lazy at zero with no endpoint, and stops pods from becoming ready: the played
   * EndpointSlice controller must have caught up with zero replicas too, or a request would still find
   * the last pod's endpoint ready. Returns the Function.
   */
  const atZeroWithNoEndpoint = async () => {
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    podsBecomeReady = false;
    await eventually('no endpoint for lazy', async () => {
      const slice = await getObject<KubeObject>(env.http, ENDPOINT_SLICE, env.ns, 'lazy-test');
      return ((slice as { endpoints?: unknown[] } | undefined)?.endpoints ?? []).length === 0;
    });
    return (await system.store.get('Function', env.ns, 'lazy')) as SlessFunction;
  };

  beforeAll(async () => {
    env = await kubeEnv('s2z');
    repo = await startRemoteRepo({
      'lazy/function.yaml': functionManifest('lazy', { scaleToZero: { idleSeconds: 2 } }),
      'lazy/handler.js': nodeHandler(`return 'lazy';`),
      // Its schedule never comes round in a test; the test plays its runs.
      'lazy/trigger.yaml':
        'apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: wake\nspec: {type: cron, function: lazy, schedule: "0 0 1 1 *", event: {tick: 1}}\n',
    });
    upstream = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        served.push({
          method: req.method ?? '',
          url: req.url ?? '',
          trigger: String(req.headers['x-sless-trigger'] ?? ''),
          body,
        });
        res.end(JSON.stringify({ served: req.url }));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(
      { ...env.config, activationTimeoutMs: 10_000 },
      {
        logger,
        kubeConfig: env.cluster.kubeConfig,
        originOf: () => `http://127.0.0.1:${port}`,
        pollMs: 100,
        idleSweepMs: 200,
        isLeader: () => systemLeads,
      },
    );
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    stopEndpoints = playEndpointSlices(env.http, env.ns, { podsReady: () => podsBecomeReady });
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await eventually('build Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('lazy', commit)),
    );
    await markBuildSucceeded(env.http, env.controllerNs, buildName('lazy', commit), fakeDigest(commit));
    await eventually('lazy Ready', async () => (await status('lazy'))?.phase === 'Ready');
  });

  /**
   * Resolves once the scaler has looked for a ready endpoint of `name` `times` more times and found
   * none: the positive signal that held requests had time to be answered or refused, and were not.
   */
  async function scalerFindsNoEndpoint(name: string, times: number): Promise<void> {
    const scaler = system.scaler;
    const look = scaler.readyEndpoint.bind(scaler);
    let misses = 0;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the scaler looked for ${name}'s endpoint ${misses} times`)),
          30_000,
        );
        scaler.readyEndpoint = async (namespace, fn) => {
          const found = await look(namespace, fn);
          if (fn === name && found === undefined && ++misses >= times) resolve();
          return found;
        };
      });
    } finally {
      clearTimeout(timer);
      Reflect.deleteProperty(scaler, 'readyEndpoint');
    }
  }

  // A case that failed while its pods were held back must not hold back the next case's.
  afterEach(() => {
    podsBecomeReady = true;
  });

  afterAll(async () => {
    stopEndpoints?.();
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await repo?.close();
    await env?.close();
  });

  it('scales an idle function to 0 and says so in status, still Ready', async () => {
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    const s = await eventually('status ScaledToZero', async () => {
      const current = await status('lazy');
      return current?.phase === 'ScaledToZero' ? current : undefined;
    });
    const condition = (type: string) => s.conditions?.find((c) => c.type === type);
    expect(condition('Ready')?.status).toBe('True');
    expect(condition('ScaledToZero')).toMatchObject({ status: 'True', reason: 'ScaledToZero' });
    // The scale subresource took the count from the controller, whose apply now leaves it alone.
    expect(replicasOwners(await deployment('lazy'))).not.toContain(FIELD_MANAGER);
  });

  it('holds 20 concurrent first requests, scales up once, and answers them all once an endpoint is ready', async () => {
    // At zero with its endpoint gone too: a lingering endpoint of the last pod would answer at once.
    await atZeroWithNoEndpoint();
    const before = system.scaler.scaleUpsOf(env.ns, 'lazy');
    let answered = 0;
    const calls = Array.from({ length: 20 }, () =>
      call('lazy').then((result) => {
        answered++;
        return result;
      }),
    );
    await eventually('scaled up to 1', async () => (await replicas('lazy')) === 1);
    // Scaled, but no endpoint is ready: the scaler has looked again and again, and every request is
    // still held (neither answered nor refused).
    await scalerFindsNoEndpoint('lazy', 3);
    expect(answered).toBe(0);
    podsBecomeReady = true;
    const results = await Promise.all(calls);
    expect(results.map(([code]) => code)).toEqual(Array(20).fill(200));
    expect(system.scaler.scaleUpsOf(env.ns, 'lazy') - before).toBe(1);
    await eventually('status Ready again', async () => (await status('lazy'))?.phase === 'Ready');
    expect((await status('lazy'))?.conditions?.find((c) => c.type === 'ScaledToZero')?.status).toBe('False');
  });

  it("a cron Trigger's run wakes the function at zero through /fn/: held, one scale-up, then delivered", async () => {
    // Until the played EndpointSlice is empty too, /fn/ would still send the call to the last pod.
    await atZeroWithNoEndpoint();
    const args = await eventually('CronJob', cronArgs);
    const activator = new URL(system.url);
    const before = system.scaler.scaleUpsOf(env.ns, 'lazy');
    const servedBefore = served.length;
    let exited = false;
    // The pod's curl, as the CronJob runs it; --connect-to plays cluster DNS and the sless-api Service.
    const run = new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        'curl',
        [
          '--connect-to',
          `sless-api.${env.controllerNs}.svc:80:${activator.hostname}:${activator.port}`,
          ...args,
        ],
        (error, stdout, stderr) => {
          exited = true;
          resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
        },
      );
    });
    await eventually('scaled up to 1 by the cron call', async () => {
      // curl giving up says why at once, instead of a bare timeout.
      if (exited) throw new Error(`curl exited before a scale-up: ${JSON.stringify(await run)}`);
      return (await replicas('lazy')) === 1;
    });
    // Scaled, but no endpoint is ready: the scaler has looked again and again, and the call is held,
    // not refused.
    await scalerFindsNoEndpoint('lazy', 3);
    expect(exited).toBe(false);
    podsBecomeReady = true;
    const result = await run;
    expect(result).toEqual({ code: 0, stdout: JSON.stringify({ served: '/' }), stderr: '' });
    expect(served.slice(servedBefore)).toEqual([
      { method: 'POST', url: '/', trigger: 'wake', body: JSON.stringify({ tick: 1 }) },
    ]);
    expect(system.scaler.scaleUpsOf(env.ns, 'lazy') - before).toBe(1);
  });

  it('a second replica that sees the function at zero at the same time does not scale it again', async () => {
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    const fn = (await system.store.get('Function', env.ns, 'lazy')) as SlessFunction;
    const other = new KubeScaler({ http: env.http, store: system.store, logger, isLeader: () => false });
    const before = system.scaler.scaleUpsOf(env.ns, 'lazy');
    const [a, b] = await Promise.all([system.scaler.activate(fn), other.activate(fn)]);
    expect([a, b]).toEqual(['http://10.96.7.7:8080', 'http://10.96.7.7:8080']);
    expect(system.scaler.scaleUpsOf(env.ns, 'lazy') - before + other.scaleUpsOf(env.ns, 'lazy')).toBe(1);
  });

  it('a held request goes to a started pod as soon as its runtime answers /healthz, before its endpoint is ready', async () => {
    const fn = await atZeroWithNoEndpoint();
    const upstreamOrigin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const probed: string[] = [];
    const prober = new KubeScaler({
      http: env.http,
      store: system.store,
      logger,
      activationTimeoutMs: 5000,
      isLeader: () => false,
      podOrigin: (ip) => {
        probed.push(ip);
        return upstreamOrigin;
      },
    });
    // Plays the kubelet: the scaled-up pod runs and has an address; its readiness is never reported.
    const pod = 'lazy-played-pod';
    const activated = prober.activate(fn);
    try {
      await eventually('scaled up to 1', async () => (await replicas('lazy')) === 1);
      await env.http.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: pod,
            labels: { [LABEL_FUNCTION]: 'lazy', [LABEL_COMPONENT]: 'function' },
          },
          spec: { containers: [{ name: 'function', image: 'function:test' }] },
        },
      });
      await markPodStarted(env.http, env.ns, pod, '10.96.8.8');
      expect(await activated).toBe(upstreamOrigin);
      expect(probed).toContain('10.96.8.8');
    } finally {
      await activated.catch(() => undefined);
      await env.http.request('DELETE', `/api/v1/namespaces/${env.ns}/pods/${pod}`).catch(() => undefined);
      podsBecomeReady = true;
    }
  });

  it('scales down only where isLeader says so', async () => {
    systemLeads = false;
    try {
      await call('lazy');
      await eventually('lazy running', async () => (await replicas('lazy')) === 1);
      const follower = new KubeScaler({ http: env.http, store: system.store, logger, isLeader: () => false });
      const leader = new KubeScaler({ http: env.http, store: system.store, logger });
      // A new leader counts idle time from when it first sees the function running.
      await leader.sweep();
      await new Promise((r) => setTimeout(r, 2100));
      await follower.sweep();
      expect(await replicas('lazy')).toBe(1);
      await leader.sweep();
      expect(await replicas('lazy')).toBe(0);
    } finally {
      systemLeads = true;
    }
  });

  it('a held request gets a 503 with the reason when no endpoint is ready in time, or when the queue is full', async () => {
    const fn = await atZeroWithNoEndpoint();
    const bounded = new KubeScaler({
      http: env.http,
      store: system.store,
      logger,
      activationTimeoutMs: 1000,
      maxHeldPerFunction: 2,
    });
    try {
      const held = [bounded.activate(fn), bounded.activate(fn)];
      await expect(bounded.activate(fn)).rejects.toThrow(
        `function ${env.ns}/lazy is starting from zero and already holds 2 requests; try again`,
      );
      for (const outcome of await Promise.allSettled(held))
        expect(outcome).toMatchObject({
          status: 'rejected',
          reason: { message: `function ${env.ns}/lazy did not start within 1s: no pod became ready` },
        });
      // The function's own activationTimeoutSec wins over the controller's setting.
      const patient = new KubeScaler({
        http: env.http,
        store: system.store,
        logger,
        activationTimeoutMs: 60_000,
      });
      const own = { ...fn, spec: { ...fn.spec, scaleToZero: { idleSeconds: 2, activationTimeoutSec: 1 } } };
      await expect(patient.activate(own)).rejects.toThrow(
        `function ${env.ns}/lazy did not start within 1s: no pod became ready`,
      );
      // Through /fn/: the same reason, as a 503.
      const [code, body] = await call('lazy');
      expect(code).toBe(503);
      expect(JSON.parse(body)).toEqual({
        error: `function ${env.ns}/lazy did not start within 10s: no pod became ready`,
      });
    } finally {
      podsBecomeReady = true;
    }
  });

  it('a function that stops scaling to zero has its cron Trigger call its Service again', async () => {
    await eventually('lazy at zero', async () => (await replicas('lazy')) === 0, 30_000);
    await repo.push({ 'lazy/function.yaml': functionManifest('lazy', { env: { COLOUR: 'blue' } }) });
    await system.controller.syncNow(env.ns, 'repo');
    await eventually('lazy back at 1 replica', async () => (await replicas('lazy')) === 1);
    // Running all the time, its cron Trigger calls its Service again rather than /fn/.
    await eventually('cron calls the Service', async () =>
      (await cronArgs())?.includes(`http://lazy.${env.ns}.svc:8080/`),
    );
  });
});
