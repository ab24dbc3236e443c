/**
 * `/fn/` through an API-server outage on a real node (kubelet, containerd, runc, kube-proxy,
 * controller-manager, scheduler; nothing played): three always-on functions under an open-loop load
 * of 20 requests a second each keep answering 200 while kube-apiserver is SIGKILLed for 60 s (etcd
 * keeps the data), while it restarts and while the cluster recovers; the function parked at zero
 * answers a fast 503 with Retry-After that names the control plane; once the API server is back the
 * caches resync by themselves, the function at zero starts on request and a new commit deploys and
 * serves. Before that, the API server's own request counter shows that 3,000 `/fn/` requests read no
 * Function, Deployment, Service or EndpointSlice beyond what an idle window of the same length reads.
 *
 * What the node does after the restart is sampled and printed (the node's Ready condition, the pods'
 * readiness, the functions' ready endpoints and available replicas, the controller-manager's events):
 * the controller-manager's node health check may mark the node Unknown and its pods not ready as
 * soon as the API server answers (when the kubelet has not renewed its lease yet), which /fn/ sees
 * through (their containers still pass the kubelet's probes), and its own caches
 * stay behind the API server for about a minute more, so neither the EndpointSlice nor the Deployment
 * controller acts on it, nor on a scale-up, until then. The load runs until the node is whole again, the function
 * at zero has been parked and started again (so the controller-manager has caught up), and past it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apply, getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import {
  DEPLOYMENT,
  ENDPOINT_SLICE,
  POD,
  type ResourceType,
  SERVICE,
} from '../../src/platform/kube/resource-types.js';
import { serviceName } from '../../src/platform/kube/workload-manifests.js';
import { NODE_NAME } from '../cluster/node.ts';
import { functionManifest, nodeHandler } from '../helpers/git.js';
import { eventually } from '../kube/harness.js';
import { callFunction, type E2eEnv, servedBody, startE2e } from './harness.ts';
import {
  apiServerObjectReads,
  describePhases,
  failed,
  type OutageRecord,
  openLoad,
  ROUTED_RESOURCES,
  readsBetween,
} from './outage-load.ts';

const NODE: ResourceType = { apiVersion: 'v1', kind: 'Node', plural: 'nodes', namespaced: false };
const BUILD_MS = 10 * 60_000;
const RUNNING = ['alpha', 'beta', 'gamma'] as const;
const COLD = 'cold';
const OUTAGE_MS = 60_000;
const BEFORE_MS = 10_000;
/** How long the load goes on after the function at zero has started again following the restart. */
const AFTER_MS = 30_000;
const IDLE_WINDOW_MS = 10_000;
const hello = (name: string) => `"hello":"${name}"`;
const handler = (name: string) =>
  nodeHandler(`return { hello: '${name}', pod: require('node:os').hostname() };`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const progress = (message: string) => process.stderr.write(`[node-api-outage] ${message}\n`);

interface NodeSample {
  at: number;
  nodeReady: string;
  /** Function pods whose Ready condition is True, of those not terminating. */
  podsReady: number;
  pods: number;
  /** Ready endpoints of each running function's Service. */
  endpoints: Record<string, number>;
  /** Each running function's Deployment's availableReplicas (what /fn/ routes by). */
  available: Record<string, number>;
  /** The function at zero: its replicas, and its pods as phase/IP/Ready. */
  cold: string;
}

describe('e2e on a real node: /fn/ through an API-server outage', () => {
  let env: E2eEnv;
  let apiServerDown = false;

  const replicas = async (name: string) =>
    ((await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name))?.spec as { replicas?: number })
      ?.replicas;
  const podsOf = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': name },
      })
    ).items;
  const atZero = () =>
    eventually(
      `${COLD} scaled to zero with no pod left`,
      async () => (await replicas(COLD)) === 0 && (await podsOf(COLD)).length === 0,
      120_000,
    );

  /** One request to the function at zero, held while it starts (longer than its activation timeout). */
  async function askCold(since: number) {
    const sent = Date.now();
    try {
      const res = await fetch(`${env.system.url}/fn/${env.ns}/${COLD}/`, {
        signal: AbortSignal.timeout(120_000),
      });
      const body = await res.text();
      const retryAfter = res.headers.get('retry-after');
      return { status: res.status, retryAfter, body, sentMs: sent - since, ms: Date.now() - sent };
    } catch (error) {
      return {
        status: 0,
        retryAfter: null,
        body: (error as Error).message,
        sentMs: sent - since,
        ms: Date.now() - sent,
      };
    }
  }

  async function sampleNode(): Promise<NodeSample> {
    const at = Date.now();
    const node = await getObject<KubeObject>(env.http, NODE, undefined, NODE_NAME);
    type Conditions = { conditions?: { type: string; status: string }[] };
    const nodeReady =
      (node?.status as Conditions | undefined)?.conditions?.find((c) => c.type === 'Ready')?.status ?? '?';
    const pods = (await listObjects<KubeObject>(env.http, POD, { namespace: env.ns })).items.filter(
      (p) =>
        !p.metadata.deletionTimestamp && RUNNING.includes(p.metadata.labels?.['sless.dev/function'] as never),
    );
    const podsReady = pods.filter((p) =>
      (p.status as Conditions | undefined)?.conditions?.some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    ).length;
    const slices = (await listObjects<KubeObject>(env.http, ENDPOINT_SLICE, { namespace: env.ns })).items;
    const endpoints: Record<string, number> = {};
    for (const fn of RUNNING) {
      endpoints[fn] = slices
        .filter((s) => s.metadata.labels?.['kubernetes.io/service-name'] === serviceName(fn))
        .flatMap((s) => (s as { endpoints?: { conditions?: { ready?: boolean } }[] }).endpoints ?? [])
        .filter((e) => e.conditions?.ready !== false).length;
    }
    const available: Record<string, number> = {};
    for (const fn of RUNNING)
      available[fn] =
        (
          (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, fn))?.status as
            | { availableReplicas?: number }
            | undefined
        )?.availableReplicas ?? 0;
    type PodStatus = Conditions & { phase?: string; podIP?: string };
    const coldPods = (await podsOf(COLD)).map((p) => {
      const st = p.status as PodStatus | undefined;
      const ready = st?.conditions?.find((c) => c.type === 'Ready')?.status ?? '-';
      return `${st?.phase ?? '?'}/${st?.podIP ?? 'no IP'}/Ready=${ready}`;
    });
    const cold = `replicas ${await replicas(COLD)} pods [${coldPods.join(' ')}]`;
    return { at, nodeReady, podsReady, pods: pods.length, endpoints, available, cold };
  }

  beforeAll(
    async () => {
      const files: Record<string, string> = {
        [`${COLD}/function.yaml`]: functionManifest(COLD, { scaleToZero: { idleSeconds: 5 } }),
        [`${COLD}/handler.js`]: handler(COLD),
      };
      for (const fn of RUNNING) {
        files[`${fn}/function.yaml`] = functionManifest(fn);
        files[`${fn}/handler.js`] = handler(fn);
      }
      env = await startE2e('outage', files);
      const started = Date.now();
      await Promise.all([...RUNNING, COLD].map((fn) => servedBody(env, fn, hello(fn), BUILD_MS)));
      progress(`four functions built and serving in ${Date.now() - started} ms`);
      await atZero();
    },
    15 * 60_000 + BUILD_MS,
  );

  afterAll(async () => {
    // A case that failed while the API server was down must not leave the teardown waiting on it.
    if (apiServerDown) await env?.node.apiServer.restart();
    await env?.close();
  }, 300_000);

  it("makes no read the API server counts for 3,000 /fn/ requests, beyond an idle window's", async () => {
    // Before the outage: the restarted API server counts from zero again. The control loop settles
    // first (the count holding still for two seconds in a row).
    let last = -1;
    let stillSince = Date.now();
    await eventually(
      'the API server read counter holding still',
      async () => {
        const now = readsBetween({}, await apiServerObjectReads(env.http)).total;
        if (now !== last) {
          last = now;
          stillSince = Date.now();
        }
        return Date.now() - stillSince >= 2000;
      },
      90_000,
    );
    const idleFrom = await apiServerObjectReads(env.http);
    await sleep(IDLE_WINDOW_MS);
    const loadFrom = await apiServerObjectReads(env.http);
    const idle = readsBetween(idleFrom, loadFrom);

    const started = Date.now();
    // About 330 requests a second over the three functions, so that 3,000 take about the idle window.
    const load = openLoad(env, RUNNING, { intervalMs: 9, timeoutMs: 30_000, expected: hello });
    await eventually('3,000 requests sent', async () => load.sentIn('before') >= 3000, 120_000);
    await load.stop();
    const loadMs = Date.now() - started;
    // The load's window is at least as long as the idle one.
    if (loadMs < IDLE_WINDOW_MS) await sleep(IDLE_WINDOW_MS - loadMs);
    const windowMs = Date.now() - started;
    const loadTo = await apiServerObjectReads(env.http);
    const during = readsBetween(loadFrom, loadTo);

    // The positive control: the counter moves by at least the reads made here, five of each.
    const slices = await listObjects<KubeObject>(env.http, ENDPOINT_SLICE, { namespace: env.ns });
    const slice = slices.items.find(
      (s) => s.metadata.labels?.['kubernetes.io/service-name'] === serviceName('alpha'),
    );
    for (let i = 0; i < 5; i++) {
      // The controller's own store reads the API server as the data path would if it asked.
      await env.system.store.get('Function', env.ns, 'alpha');
      await getObject(env.http, DEPLOYMENT, env.ns, 'alpha');
      await getObject(env.http, SERVICE, env.ns, serviceName('alpha'));
      await getObject(env.http, ENDPOINT_SLICE, env.ns, slice?.metadata.name ?? 'none');
    }
    const control = readsBetween(loadTo, await apiServerObjectReads(env.http));

    const answered = load.records.length;
    const wrong = load.records.filter(failed);
    progress(
      `${answered} /fn/ requests over ${windowMs} ms (sent in ${loadMs} ms): the API server counted ${during.total} GETs of ${ROUTED_RESOURCES.join(', ')} ${JSON.stringify(during.byResource)}; ${idle.total} in an idle window of ${IDLE_WINDOW_MS} ms ${JSON.stringify(idle.byResource)}; 5 reads of each by the test counted ${JSON.stringify(control.byResource)}`,
    );
    expect(answered).toBeGreaterThanOrEqual(3000);
    expect(wrong.slice(0, 3)).toEqual([]);
    for (const r of ROUTED_RESOURCES) expect(control.byResource[r], r).toBeGreaterThanOrEqual(5);
    // The controller-manager or the control loop may read an object by itself: a margin of five.
    expect(during.total).toBeLessThanOrEqual(idle.total + 5);
  }, 300_000);

  it(
    'keeps three functions answering through 60 s without the API server, and resyncs after',
    async () => {
      await atZero();
      const load = openLoad(env, RUNNING, { intervalMs: 50, timeoutMs: 30_000, expected: hello });
      await sleep(BEFORE_MS);

      load.setPhase('down');
      apiServerDown = true;
      const killedAt = Date.now();
      await env.node.apiServer.kill();
      progress('API server SIGKILLed');
      // The function at zero, asked while the API server is gone: answered before the restart (a
      // held socket would still be open when it comes).
      const cold = sleep(10_000).then(() => askCold(killedAt));
      await sleep(OUTAGE_MS - (Date.now() - killedAt));
      const coldAnswer = await Promise.race([cold, sleep(0).then(() => undefined)]);

      load.setPhase('restart');
      const restartFrom = Date.now();
      await env.node.apiServer.restart();
      apiServerDown = false;
      const backAt = Date.now();
      load.setPhase('after');
      progress(`API server back after ${backAt - killedAt} ms (restart took ${backAt - restartFrom} ms)`);

      // From the restart on, what the node does, every 500 ms, while the load goes on.
      const samples: NodeSample[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const next = Date.now() + 500;
          const s = await sampleNode().catch(() => undefined);
          if (s) samples.push(s);
          await sleep(Math.max(0, next - Date.now()));
        }
      })();

      let leaderMs: number | undefined;
      const leads = eventually(
        'this replica leads again',
        async () => env.system.leadership.isLeader(),
        120_000,
      ).then(() => {
        leaderMs = Date.now() - backAt;
      });
      // The first request to the function at zero once the API server is back: sless's caches
      // reconnect within seconds and it scales up; whether a pod is ready within the activation
      // timeout is the cluster's controllers' to say (see the samples).
      const coldFirst = askCold(backAt);
      // The load goes on until the node is whole again (Ready, its pods ready), then through a whole
      // cycle of the function at zero (the leader's idle sweep parks it, one request starts it: its
      // pod comes only once the controller-manager's caches have caught up, the moment it could
      // still drop endpoints of pods it marked not ready), and for AFTER_MS more.
      await eventually(
        'the node Ready again with its pods ready',
        async () => {
          const last = samples.at(-1);
          return last?.nodeReady === 'True' && last.podsReady === RUNNING.length;
        },
        300_000,
      );
      const nodeReadyMs = Date.now() - backAt;
      await leads;
      const coldFirstAnswer = await coldFirst;
      await atZero();
      // The node can be whole before sless's watches are back (an outage shorter than the node's
      // grace period); until they are, a function at zero is refused at once by design.
      await eventually(
        'sless watches the API server again',
        async () => env.system.routes.watching(),
        60_000,
      );
      // The node may have stayed Ready (then its pods never went not ready, and the wait above ends
      // at once), while the controller-manager's caches still lag the restarted API server by up
      // to a minute: a scale-up then waits past the activation timeout. Its Deployment controller
      // syncing a new Deployment is the sign that it acts again.
      const probe = `cm-probe-${Date.now()}`;
      await apply(env.http, DEPLOYMENT, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: probe, namespace: env.ns },
        spec: {
          replicas: 0,
          selector: { matchLabels: { probe } },
          template: {
            metadata: { labels: { probe } },
            spec: { containers: [{ name: 'probe', image: 'probe:never-run' }] },
          },
        },
      });
      await eventually(
        "the controller-manager's Deployment controller acts again",
        async () =>
          (
            (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, probe))?.status as
              | { observedGeneration?: number }
              | undefined
          )?.observedGeneration === 1,
        180_000,
      );
      const scaleUps = env.system.scaler.scaleUpsOf(env.ns, COLD);
      const coldCycle = await askCold(backAt);
      const coldCycleScaleUps = env.system.scaler.scaleUpsOf(env.ns, COLD) - scaleUps;
      await sleep(AFTER_MS);
      await load.stop();
      sampling = false;
      await sampler;

      const events = (
        await env.http.request<{
          items: (KubeObject & {
            reason?: string;
            message?: string;
            involvedObject?: { kind?: string; name?: string };
            lastTimestamp?: string;
            eventTime?: string;
          })[];
        }>('GET', '/api/v1/events')
      ).items.filter((e) => Date.parse(e.lastTimestamp ?? e.eventTime ?? '') >= killedAt - 1000);
      const phases = ['before', 'down', 'restart', 'after'];
      const records = load.records;
      // Once the API server is back, the cluster may revoke the pods' readiness itself: the
      // controller-manager marks the node Unknown when the kubelet has not renewed its lease yet, and
      // with it every pod's Ready (not its ContainersReady), and the Deployments report 0 available
      // until the kubelet sets the pods ready again. /fn/ keeps sending to those pods meanwhile: what
      // it holds is only what arrives between the slices' change and the pods' (milliseconds).
      const wrong = records.filter(failed);
      const heldAfter = records.filter((r) => r.phase === 'after' && !failed(r) && r.ended - r.sent >= 1000);
      const transitions = samples.filter(
        (s, i) => i === 0 || JSON.stringify({ ...s, at: 0 }) !== JSON.stringify({ ...samples[i - 1], at: 0 }),
      );
      progress(
        [
          ...describePhases(records, phases),
          `answered after the restart in 1 s or more (held while the cluster reported no available replica): ${heldAfter.length}, the longest ${Math.max(0, ...heldAfter.map((r) => r.ended - r.sent))} ms`,
          `failed requests (${wrong.length}):`,
          ...wrong
            .slice(0, 20)
            .map(
              (r: OutageRecord) =>
                `  ${r.fn} ${r.phase} +${((r.sent - killedAt) / 1000).toFixed(1)} s after the kill: ${r.status} after ${r.ended - r.sent} ms: ${r.wrong}`,
            ),
          `cold during the outage: ${JSON.stringify(coldAnswer)}`,
          `cold, first request after the restart: sent +${(coldFirstAnswer.sentMs / 1000).toFixed(1)} s, ${coldFirstAnswer.status} after ${coldFirstAnswer.ms} ms: ${coldFirstAnswer.body.slice(0, 200)}`,
          `node Ready with its pods ready ${nodeReadyMs} ms after the API server was back; this replica led again after ${leaderMs} ms`,
          `cold, parked and started from zero again once the node was whole: sent +${(coldCycle.sentMs / 1000).toFixed(1)} s, ${coldCycle.status} after ${coldCycle.ms} ms (${coldCycleScaleUps} scale-up)`,
          'node, pods and endpoints from the restart on (changes only):',
          ...transitions.map(
            (s) =>
              `  +${((s.at - backAt) / 1000).toFixed(1)} s node Ready=${s.nodeReady} pods ready ${s.podsReady}/${s.pods} endpoints ${JSON.stringify(s.endpoints)} available ${JSON.stringify(s.available)} cold ${s.cold}`,
          ),
          `events since the kill: ${events.length}`,
          ...events
            .filter((e) => e.involvedObject?.kind !== 'Function')
            .slice(0, 30)
            .map(
              (e) =>
                `  +${((Date.parse(e.lastTimestamp ?? e.eventTime ?? '') - backAt) / 1000).toFixed(0)} s ${e.involvedObject?.kind}/${e.involvedObject?.name}: ${e.reason}: ${e.message?.slice(0, 120)}`,
            ),
        ].join('\n'),
      );

      for (const phase of phases)
        expect(records.filter((r) => r.phase === phase).length, `requests sent ${phase}`).toBeGreaterThan(0);
      expect(records.filter((r) => r.phase === 'down').length).toBeGreaterThanOrEqual(
        ((OUTAGE_MS / 1000) * 20 * RUNNING.length) / 2,
      );
      // Through the outage, the restart and the cluster's recovery nothing may fail.
      expect(wrong.slice(0, 5), 'failed /fn/ requests').toEqual([]);
      // Held for the seconds the node's pods were not ready, they would have taken 10 s and more.
      expect(
        heldAfter.filter((r) => r.ended - r.sent >= 10_000).slice(0, 5),
        'requests held after the restart',
      ).toEqual([]);
      // The function at zero: refused at once, with the control plane named, while it was down.
      expect(coldAnswer, 'the function at zero answered before the restart').toBeDefined();
      expect(coldAnswer?.status).toBe(503);
      expect(coldAnswer?.retryAfter).toBe('1');
      expect(JSON.parse(coldAnswer?.body ?? '{}')).toEqual({
        error: `function ${env.ns}/${COLD} is scaled to zero and cannot be started while the control plane is unreachable; try again`,
      });
      // The first request after the restart: started; or refused as while the API server was down
      // (sless's caches not reconnected yet); or refused with the activation timeout's words (no pod
      // ready in time: the cluster's controllers had not caught up).
      if (coldFirstAnswer.status !== 200) {
        expect(coldFirstAnswer.status).toBe(503);
        expect(coldFirstAnswer.retryAfter).toBe('1');
        expect(JSON.parse(coldFirstAnswer.body).error).toMatch(
          new RegExp(
            `^function ${env.ns}/${COLD} (did not start within 60s: |is scaled to zero and cannot be started while the control plane is unreachable; try again$)`,
          ),
        );
      } else expect(coldFirstAnswer.body).toContain(hello(COLD));
      expect(coldCycle.status).toBe(200);
      expect(coldCycle.body).toContain(hello(COLD));
      expect(coldCycleScaleUps).toBe(1);
    },
    BEFORE_MS + OUTAGE_MS + AFTER_MS + 600_000,
  );

  it(
    'deploys and serves a new commit after the restart',
    async () => {
      const started = Date.now();
      await env.commit({ 'alpha/handler.js': handler('alpha-v2') });
      await servedBody(env, 'alpha', hello('alpha-v2'), BUILD_MS);
      progress(`a new commit served ${Date.now() - started} ms after it was pushed`);
      for (const fn of ['beta', 'gamma']) expect((await callFunction(env, fn))[1]).toContain(hello(fn));
    },
    BUILD_MS + 60_000,
  );
});
