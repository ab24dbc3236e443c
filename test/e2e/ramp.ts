/**
 * The autoscale ramp on the real node, shared by its test (autoscale-ramp.test.ts) and its benchmark
 * (bench/node-autoscale-ramp.ts): closed-loop clients through `/fn/` (ramp-clients.mjs, in a worker
 * thread) join stepwise up to a peak, hold it, and stop, while the function's pods and the Deployment's
 * replicas are sampled every 500 ms from the API server; after the load, the samples go on until the
 * function is back at one pod. Figures: time from the load's start to N ready pods, p99 latency while
 * ramping and at full load, pods over time, and which pod answered.
 */
import { Worker } from 'node:worker_threads';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, POD, type ResourceType } from '../../src/platform/kube/resource-types.js';
import type { E2eEnv } from './harness.ts';

const EVENT: ResourceType = { apiVersion: 'v1', kind: 'Event', plural: 'events', namespaced: true };

/** The function the ramp drives: 100 ms of sleep per request, never CPU. */
export const RAMP_HANDLER_BODY = `await new Promise((r) => setTimeout(r, 100)); return { hello: 'ramp', pod: require('node:os').hostname() };`;

export interface RampOptions {
  /** Concurrent clients at each step, e.g. 1, 6, 11, … 60. */
  levels: number[];
  stepMs: number;
  /** How long the last level holds. */
  holdMs: number;
  /** The share of the hold, at its end, that counts as steady state. */
  steadyMs: number;
  /** How long after the load stops the function may take to be back at `min` pods. */
  settleMs: number;
  /** The pods `min` means (the function's spec.scale.min). */
  min: number;
}

export interface PodSample {
  /** Epoch ms. */
  at: number;
  /** The Deployment's spec.replicas. */
  replicas: number;
  /** Pods whose Ready condition is True and that are not terminating. */
  ready: number;
  /** Pods not terminating (ready or starting), and those terminating. */
  live: number;
  terminating: number;
  /** Live pods the scheduler has not placed, with its reason. */
  unschedulable: string[];
  /** In-flight requests the controller's /fn/ proxy counts for the autoscaler at that moment. */
  proxyInflight: number;
}

/** [started, ended, status (0: no answer), pod or what was wrong], epoch ms. */
export type RequestRecord = [number, number, number, string];

export interface RampRun {
  start: number;
  fullAt: number;
  stoppedAt: number;
  records: RequestRecord[];
  samples: PodSample[];
  /** When the Deployment was back at `min` replicas with `min` ready pods, and when no other pod was left. */
  atMinAt?: number;
  onlyMinAt?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function rampLevels(peak: number, step: number): number[] {
  const levels = [1];
  while ((levels.at(-1) ?? peak) < peak) levels.push(Math.min((levels.at(-1) ?? 0) + step, peak));
  return levels;
}

async function samplePods(env: E2eEnv, name: string): Promise<PodSample> {
  const at = Date.now();
  const [deployment, pods] = await Promise.all([
    getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name),
    listObjects<KubeObject>(env.http, POD, { namespace: env.ns, labels: { 'sless.dev/function': name } }),
  ]);
  type PodStatus = { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
  let ready = 0;
  let live = 0;
  let terminating = 0;
  const unschedulable: string[] = [];
  for (const pod of pods.items) {
    if (pod.metadata.deletionTimestamp) {
      terminating++;
      continue;
    }
    live++;
    const conditions = (pod.status as PodStatus | undefined)?.conditions ?? [];
    if (conditions.some((c) => c.type === 'Ready' && c.status === 'True')) ready++;
    const scheduled = conditions.find((c) => c.type === 'PodScheduled');
    if (scheduled?.status === 'False')
      unschedulable.push(`${pod.metadata.name}: ${scheduled.reason}: ${scheduled.message}`);
  }
  const replicas = (deployment?.spec as { replicas?: number } | undefined)?.replicas ?? -1;
  const proxyInflight = env.system.autoscaler.inflightOf(env.ns, name);
  return { at, replicas, ready, live, terminating, unschedulable, proxyInflight };
}

/**
 * Runs the ramp against `/fn/{ns}/{name}` and samples until the function is back at `min` pods (or
 * `settleMs` after the load stopped). Never throws for what it measures: the caller asserts.
 */
export async function runRamp(env: E2eEnv, name: string, options: RampOptions): Promise<RampRun> {
  const samples: PodSample[] = [];
  const worker = new Worker(new URL('./ramp-clients.mjs', import.meta.url), {
    workerData: {
      url: `${env.system.url}/fn/${env.ns}/${name}/`,
      expect: 'ramp',
      levels: options.levels,
      stepMs: options.stepMs,
      holdMs: options.holdMs,
      timeoutMs: 30_000,
    },
  });
  let load: Omit<RampRun, 'samples'> | undefined;
  let loadError: Error | undefined;
  const finished = new Promise<void>((resolve) => {
    worker.on('message', (message: { type: string } & Omit<RampRun, 'samples'>) => {
      if (message.type !== 'done') return;
      load = message;
      resolve();
    });
    worker.on('error', (error) => {
      loadError = error;
      resolve();
    });
    worker.on('exit', () => resolve());
  });
  try {
    let done = false;
    void finished.then(() => {
      done = true;
    });
    let atMinAt: number | undefined;
    let onlyMinAt: number | undefined;
    for (;;) {
      const next = Date.now() + 500;
      const sample = await samplePods(env, name).catch(() => undefined);
      if (sample) {
        samples.push(sample);
        if (done && load) {
          const atMin = sample.replicas === options.min && sample.ready === options.min;
          if (atMin) atMinAt ??= sample.at;
          else atMinAt = undefined;
          if (atMin && sample.live === options.min && sample.terminating === 0) onlyMinAt ??= sample.at;
          else onlyMinAt = undefined;
          if (onlyMinAt !== undefined || sample.at - load.stoppedAt > options.settleMs) break;
        }
      }
      if (done && !load) break;
      await sleep(Math.max(next - Date.now(), 0));
    }
    if (loadError) throw loadError;
    if (!load) throw new Error('the ramp clients ended without their results');
    return {
      ...load,
      samples,
      ...(atMinAt !== undefined ? { atMinAt } : {}),
      ...(onlyMinAt !== undefined ? { onlyMinAt } : {}),
    };
  } finally {
    await worker.terminate();
  }
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

export interface RampFigures {
  requests: number;
  failures: RequestRecord[];
  maxReady: number;
  maxReplicas: number;
  /** Load start → the first sample with at least `pods` ready, ms; undefined if never. */
  toPodsMs: number | undefined;
  rampP99Ms: number;
  rampP50Ms: number;
  rampRequests: number;
  steadyP99Ms: number;
  steadyP50Ms: number;
  steadyRequests: number;
  steadyPerSecond: number;
  /** Requests per pod over the steady window, most first. */
  steadyByPod: [string, number][];
  /** Load stop → Deployment back at min replicas and min ready; → no other pod left. */
  toMinMs: number | undefined;
  toOnlyMinMs: number | undefined;
  /**
   * One line per second from the load's start: requests in flight as the clients and as the proxy
   * count them, the Deployment's replicas, pods ready/live/terminating.
   */
  timeline: string[];
  unschedulable: string[];
}

export function rampFigures(run: RampRun, options: RampOptions, pods: number): RampFigures {
  const { records, samples, start, fullAt, stoppedAt } = run;
  const failed = (r: RequestRecord) =>
    r[2] !== 200 || r[3].startsWith('bad answer') || r[3].startsWith('error');
  const failures = records.filter(failed);
  const ok = records.filter((r) => !failed(r));
  const latency = (r: RequestRecord) => r[1] - r[0];
  const ramp = ok.filter((r) => r[0] >= start && r[0] < fullAt).map(latency);
  const steadyFrom = stoppedAt - options.steadyMs;
  const steady = ok.filter((r) => r[0] >= steadyFrom && r[1] <= stoppedAt);
  const byPod = new Map<string, number>();
  for (const r of steady) byPod.set(r[3], (byPod.get(r[3]) ?? 0) + 1);
  const reached = samples.find((s) => s.at >= start && s.ready >= pods);
  const timeline: string[] = [];
  for (let second = 0; ; second++) {
    const at = start + second * 1000;
    const sample = [...samples].reverse().find((s) => s.at <= at);
    if (at > (samples.at(-1)?.at ?? 0)) break;
    const clients = records.filter((r) => r[0] <= at && r[1] > at).length;
    timeline.push(
      `t=${String(second).padStart(3)}s in flight ${String(clients).padStart(2)} (proxy ${String(sample?.proxyInflight ?? '?').padStart(2)})  replicas ${sample?.replicas ?? '?'}  ready ${sample?.ready ?? '?'}  live ${sample?.live ?? '?'}  terminating ${sample?.terminating ?? '?'}`,
    );
  }
  return {
    requests: records.length,
    failures,
    maxReady: Math.max(0, ...samples.map((s) => s.ready)),
    maxReplicas: Math.max(0, ...samples.map((s) => s.replicas)),
    toPodsMs: reached ? reached.at - start : undefined,
    rampP99Ms: percentile(ramp, 99),
    rampP50Ms: percentile(ramp, 50),
    rampRequests: ramp.length,
    steadyP99Ms: percentile(steady.map(latency), 99),
    steadyP50Ms: percentile(steady.map(latency), 50),
    steadyRequests: steady.length,
    steadyPerSecond: steady.length / (options.steadyMs / 1000),
    steadyByPod: [...byPod].sort((a, b) => b[1] - a[1]),
    toMinMs: run.atMinAt !== undefined ? run.atMinAt - stoppedAt : undefined,
    toOnlyMinMs: run.onlyMinAt !== undefined ? run.onlyMinAt - stoppedAt : undefined,
    timeline,
    unschedulable: [...new Set(samples.flatMap((s) => s.unschedulable))],
  };
}

/** The autoscaler's decisions for the function (its ScaledOut/ScaledIn Events), oldest first, as lines. */
export async function scaleDecisions(env: E2eEnv, name: string, since: number): Promise<string[]> {
  const events = await listObjects<KubeObject>(env.http, EVENT, { namespace: env.ns });
  type Event = KubeObject & {
    involvedObject?: { kind?: string; name?: string };
    reason?: string;
    message?: string;
    firstTimestamp?: string;
  };
  return (events.items as Event[])
    .filter(
      (e) =>
        e.involvedObject?.kind === 'Function' &&
        e.involvedObject.name === name &&
        (e.reason === 'ScaledOut' || e.reason === 'ScaledIn'),
    )
    .map((e) => ({ at: Date.parse(e.firstTimestamp ?? ''), line: `${e.reason}: ${e.message}` }))
    .sort((a, b) => a.at - b.at)
    .map(({ at, line }) => `t=${Math.round((at - since) / 1000)}s ${line}`);
}

/** The figures as lines to print. */
export function describeRamp(run: RampRun, figures: RampFigures, pods: number): string[] {
  const s = (ms: number | undefined) => (ms === undefined ? 'never' : `${(ms / 1000).toFixed(1)} s`);
  const m = (ms: number) => `${ms.toFixed(0)} ms`;
  return [
    `requests ${figures.requests}, failed ${figures.failures.length}`,
    `load start → ${pods} ready pods: ${s(figures.toPodsMs)} (ramp to full load took ${s(run.fullAt - run.start)}); most ready ${figures.maxReady}, most replicas ${figures.maxReplicas}`,
    `p99 while ramping ${m(figures.rampP99Ms)} (p50 ${m(figures.rampP50Ms)}, ${figures.rampRequests} requests); at full load ${m(figures.steadyP99Ms)} (p50 ${m(figures.steadyP50Ms)}, ${figures.steadyRequests} requests, ${figures.steadyPerSecond.toFixed(0)}/s)`,
    `load stop → back at min: replicas and ready ${s(figures.toMinMs)}, no other pod left ${s(figures.toOnlyMinMs)}`,
    `full-load requests per pod: ${figures.steadyByPod.map(([pod, n]) => `${pod.replace(/^.*-/, '')} ${n}`).join(', ')}`,
    ...(figures.unschedulable.length ? ['unschedulable pods:', ...figures.unschedulable] : []),
    'pods over time (from load start, one line a second):',
    ...figures.timeline,
  ];
}
