/**
 * The kube `/fn/` proxy balances an always-on function's requests over the ready endpoints of its
 * Service whose pods run the serving revision, itself, request by request, on the main thread and on
 * the gateway thread alike, against a real kube-apiserver + etcd: while no such endpoint is known
 * (none listed, no pod named, a pod not seen yet, or only a rolling-out revision's pods listed) the
 * Service address serves, and a pod seen after its endpoint is used from then on; once the slices
 * list no endpoint that serves (emptied, or not ready) while the Deployment still says available, the
 * Service address would refuse connections, so requests are held until an endpoint is ready again,
 * and answered by it; with three ready endpoints, requests
 * all in flight at once are spread evenly over them, and a not-ready or terminating endpoint gets
 * nothing; an endpoint removed from the list gets nothing more; while a new revision rolls out, its
 * pods get nothing although the slice lists them ready, until status names it serving, and from then
 * on the old revision's pods get nothing; a pod whose Ready the control plane revoked while its
 * containers stay ready serves while no endpoint is ready, and a pod failing its probe never does;
 * a new revision whose every wanted pod runs and answers /healthz serves at once (status names it
 * serving, and its pods take the requests), before the kubelet, the slices or the Deployment say so,
 * and not while one of them still refuses.
 *
 * There is no EndpointSlice controller, kubelet or pod network here: the test writes the slices and
 * the Pod objects (with the revision annotation the pod template gives) itself, and each endpoint
 * address is mapped to a local HTTP server that plays its pod (`endpointOrigin`).
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { apply, getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE } from '../../src/platform/kube/resource-types.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markDeploymentAvailable,
  markPodStarted,
  playHealthyKubelet,
  recordResolves,
} from './harness.js';

/** A pod played by a local server: answers its name at once, or holds `/hold` until released. */
interface Pod {
  name: string;
  server: Server;
  port: number;
  held: ServerResponse[];
  /** Every request it got. */
  seen: number;
  /** Whether its runtime answers /healthz yet (it answers 503 until then). */
  healthy: boolean;
}

async function startPod(name: string): Promise<Pod> {
  const pod: Pod = { name, server: createServer(), port: 0, held: [], seen: 0, healthy: true };
  pod.server.on('request', (req, res) => {
    req.resume();
    pod.seen++;
    if (req.url === '/healthz' && !pod.healthy) res.writeHead(503).end();
    else if (req.url?.endsWith('/hold')) pod.held.push(res);
    else res.end(name);
  });
  await new Promise<void>((r) => pod.server.listen(0, '127.0.0.1', r));
  pod.port = (pod.server.address() as AddressInfo).port;
  return pod;
}

// The endpoint addresses the slices list, and which pod plays each.
const READY = ['10.1.0.1', '10.1.0.2', '10.1.0.3'];
const NOT_READY = '10.1.0.4';
const TERMINATING = '10.1.0.5';
/** Terminating with its ready condition left out: still never picked. */
const TERMINATING_UNSAID = '10.1.0.6';
/** The pods of the revision that rolls out in the last case. */
const NEXT = ['10.1.0.7', '10.1.0.8'];
/** The pods of a third revision, started and answering before the kubelet calls them ready. */
const STARTED = ['10.1.0.9', '10.1.0.10', '10.1.0.11'];
const N = 12;

/** The Pod object behind an address, as the slice's targetRef names it. */
const podName = (address: string) => `spread-${address.replaceAll('.', '-')}`;

interface Listed {
  address: string;
  conditions: Record<string, boolean>;
  /** Listed without a targetRef: which revision its pod runs cannot be known. */
  unnamed?: boolean;
}
const ready = (address: string): Listed => ({ address, conditions: { ready: true } });

for (const thread of [false, true]) {
  describe(`kube /fn/ balanced over endpoints, from the ${thread ? 'gateway' : 'main'} thread`, () => {
    let env: KubeEnv;
    let repo: RemoteRepo;
    let gateway: Gateway | undefined;
    let system: KubeSystem;
    let stopKubelet: () => void;
    const pods = new Map<string, Pod>();
    /** Plays the Service address (kube-proxy): where requests go while no endpoint is known. */
    let service: Pod;
    /** Whatever address the test did not map: it must never be asked. */
    let stray: Pod;
    const resolvedOnMain: string[] = [];
    /** The revision serving from the start, which READY and the others run. */
    let first: string;

    const call = async (path = '') => {
      const res = await fetch(`${system.url}/fn/${env.ns}/spread/${path}`);
      return { status: res.status, body: await res.text() };
    };

    /** Plays the kubelet's part: the Pod object of a pod at `address`, running `revision`. */
    const createPod = (address: string, revision: string) =>
      env.http.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: podName(address),
            // As the Deployment's template gives them.
            labels: {
              'app.kubernetes.io/name': 'spread',
              'app.kubernetes.io/component': 'function',
              'sless.dev/function': 'spread',
              'app.kubernetes.io/managed-by': 'sless',
            },
            annotations: { 'sless.dev/revision': revision },
          },
          spec: { containers: [{ name: 'function', image: 'function:test' }] },
        },
      });

    const servingRevision = async () =>
      ((await system.store.get('Function', env.ns, 'spread'))?.status as FunctionStatus | undefined)
        ?.servingRevision;

    /** Quick requests go round the endpoints in use: `count` answers in a row, all passing `check`. */
    const allAnswer = async (check: (body: string) => boolean, count = 6) => {
      const answers = await Promise.all(Array.from({ length: count }, () => call()));
      return answers.every((a) => a.status === 200 && check(a.body));
    };

    const writeSlice = (listed: Listed[]) =>
      apply(env.http, ENDPOINT_SLICE, {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name: 'spread-abcde',
          namespace: env.ns,
          labels: {
            'sless.dev/function': 'spread',
            'app.kubernetes.io/managed-by': 'sless',
            'kubernetes.io/service-name': 'spread',
          },
        },
        addressType: 'IPv4',
        endpoints: listed.map(({ address, conditions, unnamed }) => ({
          addresses: [address],
          conditions,
          ...(unnamed ? {} : { targetRef: { kind: 'Pod', namespace: env.ns, name: podName(address) } }),
        })),
        ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      });

    const heldBy = () => Object.fromEntries([...pods].map(([address, pod]) => [address, pod.held.length]));
    const releaseAll = () => {
      for (const pod of [...pods.values(), service, stray])
        for (const res of pod.held.splice(0)) res.end('done');
    };

    /** Sends `N` requests that the pods hold, and returns how many each held once all arrived. */
    async function spreadOf(): Promise<Record<string, number>> {
      const from = resolvedOnMain.length;
      const answers = Array.from({ length: N }, () => call('hold'));
      await eventually(
        `${N} requests held`,
        async () => [...pods.values(), service, stray].reduce((sum, pod) => sum + pod.held.length, 0) >= N,
        10_000,
      );
      const spread = heldBy();
      const elsewhere = service.held.length + stray.held.length;
      releaseAll();
      for (const answer of answers) expect(await answer).toEqual({ status: 200, body: 'done' });
      expect(elsewhere).toBe(0);
      // On the thread path, the thread served them all: the main thread's resolver was not asked.
      if (thread) expect(resolvedOnMain.slice(from)).toEqual([]);
      return spread;
    }

    beforeAll(async () => {
      env = await kubeEnv(thread ? 'lbthread' : 'lbmain');
      for (const address of [...READY, NOT_READY, TERMINATING, TERMINATING_UNSAID, ...NEXT])
        pods.set(address, await startPod(address));
      service = await startPod('service');
      stray = await startPod('stray');
      repo = await startRemoteRepo({
        'spread/function.yaml': functionManifest('spread'),
        'spread/handler.js': nodeHandler(`return 'spread';`),
      });
      gateway = thread ? await Gateway.start('127.0.0.1', 0) : undefined;
      system = await startKubeSystem(
        { ...env.config, leaderElection: { ...env.config.leaderElection, enabled: false } },
        {
          logger,
          kubeConfig: env.cluster.kubeConfig,
          originOf: () => `http://127.0.0.1:${service.port}`,
          endpointOrigin: (address) => `http://127.0.0.1:${(pods.get(address) ?? stray).port}`,
          pollMs: 100,
          ...(gateway ? { listener: gateway, gateway } : {}),
        },
      );
      recordResolves(system, resolvedOnMain);
      stopKubelet = playHealthyKubelet(env.http, env.ns);
      await system.store.apply(gitSource('repo', env.ns, repo.url));
      const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
      await completeBuild(env, 'spread', commit, commit);
      await eventually(
        'spread Ready',
        async () =>
          ((await system.store.get('Function', env.ns, 'spread'))?.status as FunctionStatus | undefined)
            ?.phase === 'Ready',
        30_000,
      );
      first = (await servingRevision()) as string;
      // The last of READY's Pod objects comes later: a pod seen after its endpoint.
      for (const address of [...READY.slice(0, -1), NOT_READY, TERMINATING, TERMINATING_UNSAID])
        await createPod(address, first);
    }, 120_000);

    afterAll(async () => {
      releaseAll();
      stopKubelet?.();
      await system?.stop();
      for (const pod of [...pods.values(), service, stray])
        if (pod) await new Promise((r) => pod.server.close(r));
      await repo?.close();
      await env?.close();
    });

    it('goes to the Service address while no endpoint of the serving revision is known, and holds requests once none serves', async () => {
      await eventually('spread answers', async () => (await call()).status === 200, 30_000);
      if (thread)
        await eventually('served by the thread', async () => {
          const before = resolvedOnMain.length;
          return (await call()).status === 200 && resolvedOnMain.length === before;
        });
      for (let i = 0; i < 3; i++) expect(await call()).toEqual({ status: 200, body: 'service' });
      expect([...pods.values()].map((pod) => pod.seen)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
      // One endpoint whose pod is not named, which gets nothing, and one of the serving revision.
      const [unnamed, named, late] = READY as [string, string, string];
      await writeSlice([{ ...ready(unnamed), unnamed: true }, ready(named)]);
      await eventually('the named endpoint in use', async () => (await call()).body === named, 10_000);
      // Equals go in turn: had the unnamed one been taken, some of these would have reached it.
      expect(await allAnswer((body) => body === named)).toBe(true);
      expect(pods.get(unnamed)?.seen).toBe(0);
      // Listed before its pod is seen: nothing known of its revision, so the Service address serves,
      // and once its pod is seen, it takes requests.
      await writeSlice([ready(late)]);
      await eventually(
        'the Service address for an unseen pod',
        () => allAnswer((b) => b === 'service'),
        10_000,
      );
      expect(pods.get(late)?.seen).toBe(0);
      await createPod(late, first);
      await eventually('the late pod in use', () => allAnswer((body) => body === late), 10_000);
      // Then the list lost every endpoint that serves while the Deployment still says available:
      // not ready (as the node's controller marks them), then emptied.
      for (const listed of [[{ address: late, conditions: { ready: false } }], []]) {
        await writeSlice(listed);
        await eventually(
          'the route cache sees no endpoint serving',
          async () => system.routes.cached(env.ns, 'spread').kind === 'no-replica',
          10_000,
        );
        const servedBefore = service.seen;
        const held = call();
        await eventually(
          'the request held',
          async () => system.routes.heldForReplica(env.ns, 'spread') === 1,
        );
        await writeSlice([ready(late)]);
        expect(await held).toEqual({ status: 200, body: late });
        expect(service.seen).toBe(servedBefore);
      }
      expect(stray.seen).toBe(0);
    });

    it('spreads requests in flight at once evenly over the ready endpoints, none to a not-ready or terminating one', async () => {
      await writeSlice([
        ...READY.map(ready),
        { address: NOT_READY, conditions: { ready: false } },
        { address: TERMINATING, conditions: { ready: false, serving: true, terminating: true } },
        { address: TERMINATING_UNSAID, conditions: { serving: true, terminating: true } },
      ]);
      await eventually('the endpoints in use', async () => READY.includes((await call()).body), 10_000);
      const spread = await spreadOf();
      process.stderr.write(`[endpoint-balance ${thread ? 'thread' : 'main'}] ${JSON.stringify(spread)}\n`);
      for (const address of READY) {
        expect(spread[address]).toBeGreaterThanOrEqual(N / 3 - 1);
        expect(spread[address]).toBeLessThanOrEqual(N / 3 + 1);
      }
      for (const address of [NOT_READY, TERMINATING, TERMINATING_UNSAID])
        expect(pods.get(address)?.seen).toBe(0);
      expect(stray.seen).toBe(0);
    });

    it('sends nothing more to an endpoint once it leaves the list', async () => {
      const [kept1, kept2, removed] = READY as [string, string, string];
      await writeSlice([ready(kept1), ready(kept2)]);
      const removedPod = pods.get(removed) as Pod;
      // Quick requests go round the endpoints: six in a row that miss it say the change is in.
      await eventually(
        'the removed endpoint out of use',
        () => allAnswer((body) => body !== removed),
        10_000,
      );
      const before = removedPod.seen;
      const spread = await spreadOf();
      expect(spread[removed]).toBe(0);
      expect(removedPod.seen).toBe(before);
      for (const kept of [kept1, kept2]) {
        expect(spread[kept]).toBeGreaterThanOrEqual(N / 2 - 1);
        expect(spread[kept]).toBeLessThanOrEqual(N / 2 + 1);
      }
    });

    it("sends nothing to a rolling-out revision's ready pods until status names it serving, then nothing to the old one's", async () => {
      const [old1, old2] = READY as [string, string];
      const [new1, new2] = NEXT as [string, string];
      const newPods = NEXT.map((address) => pods.get(address) as Pod);
      // The pods of the new revision become ready while the Deployment controller has not finished:
      // nothing marks the rollout done until the test does.
      stopKubelet();
      await repo.push({ 'spread/function.yaml': functionManifest('spread', { env: { ROLL: '2' } }) });
      await system.controller.syncNow(env.ns, 'repo');
      const next = await eventually('the new revision rolling out', async () => {
        const deployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'spread');
        const revision = deployment?.metadata.annotations?.['sless.dev/revision'];
        return revision && revision !== first ? revision : undefined;
      });
      for (const address of NEXT) await createPod(address, next);
      expect(await servingRevision()).toBe(first);

      // Listed ready beside one pod of the serving revision: all to that one.
      await writeSlice([ready(old1), ready(new1), ready(new2)]);
      // old2 leaves the list in the same write: once it gets nothing, the write is in.
      await eventually('the new slice in use', () => allAnswer((body) => body !== old2), 10_000);
      const spread = await spreadOf();
      expect(spread[old1]).toBe(N);
      // Listed alone: no endpoint of the serving revision is known, so the Service address serves.
      await writeSlice([ready(new1), ready(new2)]);
      await eventually('the Service address', () => allAnswer((body) => body === 'service'), 10_000);
      // Both revisions listed, as the Deployment controller leaves them until it scales the old down.
      await writeSlice([ready(old1), ready(old2), ready(new1), ready(new2)]);
      await eventually('both old pods in use', async () => {
        const answers = await Promise.all(Array.from({ length: 6 }, () => call()));
        return answers.some((a) => a.body === old1) && answers.some((a) => a.body === old2);
      });
      expect(await servingRevision()).toBe(first);
      expect(newPods.map((pod) => pod.seen)).toEqual([0, 0]);

      // The new pods are available: the rollout ends and status names the new revision serving.
      await markDeploymentAvailable(env.http, env.ns, 'spread');
      stopKubelet = playHealthyKubelet(env.http, env.ns);
      await eventually('the new revision serving', async () => (await servingRevision()) === next, 30_000);
      await eventually('the new pods in use', () => allAnswer((body) => NEXT.includes(body)), 10_000);
      const after = await spreadOf();
      for (const address of NEXT) {
        expect(after[address]).toBeGreaterThanOrEqual(N / 2 - 1);
        expect(after[address]).toBeLessThanOrEqual(N / 2 + 1);
      }
      expect(after[old1]).toBe(0);
      expect(after[old2]).toBe(0);
    });

    it('serves a ready endpoint of the serving revision while the Deployment still says none is available', async () => {
      stopKubelet();
      const [kept] = NEXT as [string, string];
      const cachedRoute = () => system.routes.cached(env.ns, 'spread');
      const heldMessage = () => {
        const route = cachedRoute();
        return route.kind === 'no-replica' ? route.route.message : undefined;
      };
      // Its one endpoint not ready while the Deployment still counts it available...
      await writeSlice([{ address: kept, conditions: { ready: false } }]);
      await eventually('held for no ready endpoint', async () =>
        heldMessage()?.endsWith('no ready endpoints'),
      );
      // ...then the Deployment controller says none is available, which the route cache sees...
      await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/spread/status`, {
        contentType: MERGE_PATCH,
        body: { status: { readyReplicas: 0, availableReplicas: 0, unavailableReplicas: 2 } },
      });
      await eventually('held for no available replica', async () =>
        heldMessage()?.endsWith('no available replicas'),
      );
      // ...and the endpoint is ready again before the Deployment says so: it serves at once.
      await writeSlice([ready(kept)]);
      await eventually('the ready endpoint serves', async () => cachedRoute().kind === 'ready', 10_000);
      expect(await call()).toEqual({ status: 200, body: kept });
      expect(system.routes.heldForReplica(env.ns, 'spread')).toBe(0);
      await markDeploymentAvailable(env.http, env.ns, 'spread');
      stopKubelet = playHealthyKubelet(env.http, env.ns);
    });

    it('serves a pod whose readiness the control plane revoked while its containers stay ready, until the kubelet says they are not', async () => {
      const [revoked, probed] = NEXT as [string, string];
      const cachedRoute = () => system.routes.cached(env.ns, 'spread');
      /** Plays the kubelet's and the node lifecycle controller's words on a pod's readiness. */
      const setReadiness = (address: string, ready: 'True' | 'False', containersReady: 'True' | 'False') =>
        env.http.request('PATCH', `/api/v1/namespaces/${env.ns}/pods/${podName(address)}/status`, {
          contentType: MERGE_PATCH,
          body: {
            status: {
              phase: 'Running',
              conditions: [
                { type: 'Ready', status: ready },
                { type: 'ContainersReady', status: containersReady },
              ],
            },
          },
        });
      // The node controller marked one pod not ready (Ready alone); the other fails its probe.
      await setReadiness(revoked, 'False', 'True');
      await setReadiness(probed, 'False', 'False');
      const before = { revoked: pods.get(revoked)?.seen ?? 0, probed: pods.get(probed)?.seen ?? 0 };
      await writeSlice([
        { address: revoked, conditions: { ready: false, serving: false } },
        { address: probed, conditions: { ready: false, serving: false } },
      ]);
      await eventually('the revoked endpoint serves', () => allAnswer((body) => body === revoked), 10_000);
      expect(pods.get(probed)?.seen).toBe(before.probed);
      expect(cachedRoute().kind).toBe('ready');
      // A ready endpoint listed beside it takes every request.
      await writeSlice([{ address: revoked, conditions: { ready: false, serving: false } }, ready(probed)]);
      await eventually('the ready endpoint preferred', () => allAnswer((body) => body === probed), 10_000);
      const revokedSeen = pods.get(revoked)?.seen;
      expect(await allAnswer((body) => body === probed, 12)).toBe(true);
      expect(pods.get(revoked)?.seen).toBe(revokedSeen);
      expect(before.revoked).toBeLessThan(revokedSeen ?? 0);
      // The kubelet says its containers are not ready either: alone in the list, nothing serves.
      await writeSlice([{ address: revoked, conditions: { ready: false, serving: false } }]);
      await setReadiness(revoked, 'False', 'False');
      await eventually('held for no ready endpoint', async () => cachedRoute().kind === 'no-replica', 10_000);
      const held = call();
      await eventually('the request held', async () => system.routes.heldForReplica(env.ns, 'spread') === 1);
      await setReadiness(revoked, 'True', 'True');
      await writeSlice([ready(revoked)]);
      expect(await held).toEqual({ status: 200, body: revoked });
      await setReadiness(probed, 'True', 'True');
      expect(stray.seen).toBe(0);
    });

    it("moves to a new revision's pods once each answers, before the kubelet, the slices or the Deployment say it is ready", async () => {
      stopKubelet();
      const before = await servingRevision();
      const [old1] = NEXT as [string];
      await writeSlice([ready(old1)]);
      await eventually('the serving pod in use', () => allAnswer((body) => body === old1), 10_000);
      // Two replicas: the rollout waits for both to answer.
      await repo.push({
        'spread/function.yaml': functionManifest('spread', { env: { ROLL: '3' }, replicas: 2 }),
      });
      await system.controller.syncNow(env.ns, 'repo');
      const rolling = await eventually('the third revision rolling out', async () => {
        const deployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'spread');
        const revision = deployment?.metadata.annotations?.['sless.dev/revision'];
        return revision && revision !== before ? deployment : undefined;
      });
      const third = rolling.metadata.annotations?.['sless.dev/revision'] as string;
      const wanted = (rolling.spec as { replicas?: number }).replicas ?? 1;
      expect(wanted).toBe(2);
      // The Deployment controller saw the new template and made the new pods; the old one still runs.
      await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/spread/status`, {
        contentType: MERGE_PATCH,
        body: {
          status: {
            observedGeneration: rolling.metadata.generation,
            replicas: wanted + 1,
            updatedReplicas: wanted,
            readyReplicas: 1,
            availableReplicas: 1,
          },
        },
      });
      const started = STARTED.slice(0, wanted);
      for (const address of started) {
        const pod = await startPod(address);
        pod.healthy = false;
        pods.set(address, pod);
        await createPod(address, third);
        // Played kubelet: the container runs, its probe has not passed.
        await markPodStarted(env.http, env.ns, podName(address), address);
      }
      const startedPods = started.map((address) => pods.get(address) as Pod);
      // Asked, twice each, and refused: the old revision serves on.
      await eventually(
        'the started pods asked',
        async () => startedPods.every((pod) => pod.seen >= 2),
        10_000,
      );
      expect(await servingRevision()).toBe(before);
      expect(await allAnswer((body) => body === old1)).toBe(true);
      // All but the last answer: still not every wanted replica.
      for (const pod of startedPods.slice(0, -1)) pod.healthy = true;
      const last = startedPods.at(-1) as Pod;
      const lastSeen = last.seen;
      await eventually('the last pod asked again', async () => last.seen >= lastSeen + 2, 10_000);
      expect(await servingRevision()).toBe(before);
      last.healthy = true;
      await eventually('the third revision serving', async () => (await servingRevision()) === third, 10_000);
      const fn = await system.store.get('Function', env.ns, 'spread');
      expect((fn?.status as FunctionStatus | undefined)?.phase).toBe('Ready');
      // What answers is what status counts, though the Deployment says one replica is ready.
      expect((fn?.status as FunctionStatus | undefined)?.instances).toEqual({ desired: 2, ready: 2 });
      // Served by the new pods, which no slice lists yet.
      await eventually('the started pods in use', () => allAnswer((body) => started.includes(body)), 10_000);
      expect(await allAnswer((body) => started.includes(body), 12)).toBe(true);
      // Nothing played the kubelet's or the Deployment controller's "ready": it came from the pods.
      const deployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'spread');
      expect((deployment?.status as { availableReplicas?: number } | undefined)?.availableReplicas).toBe(1);
      expect(stray.seen).toBe(0);
      await markDeploymentAvailable(env.http, env.ns, 'spread');
      stopKubelet = playHealthyKubelet(env.http, env.ns);
    });
  });
}
