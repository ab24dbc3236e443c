/**
 * Open-loop load through the controller's `/fn/` for the API-server outage on the real node, shared by
 * its test (api-outage.test.ts) and its benchmark (bench/node-api-outage.ts): each function is sent a
 * request every `intervalMs` whatever the earlier ones are doing, so a stalled answer never slows the
 * sending, and every request is recorded with the phase it was sent in. Also the API server's own
 * count of object reads from its `/metrics`, which tells whether `/fn/` asks the API server anything.
 */
import type { KubeHttp } from '../../src/platform/kube/http.js';
import type { E2eEnv } from './harness.ts';
import { percentile } from './ramp.ts';

export interface OutageRecord {
  fn: string;
  phase: string;
  /** Epoch ms sent and answered (or failed). */
  sent: number;
  ended: number;
  /** 0: no answer (a connection error or the timeout). */
  status: number;
  /** The body when it was wrong or the request failed; '' when right. */
  wrong: string;
}

export interface OpenLoad {
  records: OutageRecord[];
  setPhase(phase: string): void;
  /** Requests sent in `phase` (answered or not yet). */
  sentIn(phase: string): number;
  /** Stops sending and waits for every request in flight. */
  stop(): Promise<void>;
}

/**
 * Sends GET `/fn/{ns}/{fn}/` to each of `functions` every `intervalMs`; an answer is right when it is a
 * 200 whose body contains `expected(fn)`.
 */
export function openLoad(
  env: E2eEnv,
  functions: readonly string[],
  options: { intervalMs: number; timeoutMs: number; expected: (fn: string) => string },
): OpenLoad {
  const records: OutageRecord[] = [];
  const sent = new Map<string, number>();
  const inFlight = new Set<Promise<void>>();
  let phase = 'before';
  const one = (fn: string): void => {
    const at = phase;
    sent.set(at, (sent.get(at) ?? 0) + 1);
    const started = Date.now();
    const request = (async () => {
      let status = 0;
      let wrong = '';
      try {
        const res = await fetch(`${env.system.url}/fn/${env.ns}/${fn}/`, {
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        status = res.status;
        const body = await res.text();
        if (status !== 200 || !body.includes(options.expected(fn))) wrong = body.slice(0, 300);
      } catch (error) {
        wrong = `error: ${(error as Error).message}`;
      }
      records.push({ fn, phase: at, sent: started, ended: Date.now(), status, wrong });
    })();
    inFlight.add(request);
    void request.finally(() => inFlight.delete(request));
  };
  // One timer for all: the functions are sent to in turn, spread over the interval.
  const step = options.intervalMs / functions.length;
  let next = 0;
  const timer = setInterval(() => {
    one(functions[next % functions.length] as string);
    next++;
  }, step);
  return {
    records,
    setPhase: (p) => {
      phase = p;
    },
    sentIn: (p) => sent.get(p) ?? 0,
    stop: async () => {
      clearInterval(timer);
      while (inFlight.size) await Promise.all([...inFlight]);
    },
  };
}

export const failed = (r: OutageRecord): boolean => r.wrong !== '';

/** One line per phase: sent, failed, p50/p99 latency of the right answers. */
export function describePhases(records: readonly OutageRecord[], phases: readonly string[]): string[] {
  return phases.map((phase) => {
    const of = records.filter((r) => r.phase === phase);
    const ok = of.filter((r) => !failed(r)).map((r) => r.ended - r.sent);
    return `${phase.padEnd(10)} sent ${String(of.length).padStart(5)}, failed ${of.filter(failed).length}, p50 ${percentile(ok, 50)} ms, p99 ${percentile(ok, 99)} ms`;
  });
}

/** The resources whose single-object reads the data path would make if it asked per request. */
export const ROUTED_RESOURCES = ['functions', 'deployments', 'services', 'endpointslices'] as const;

/**
 * The API server's own count of reads of single objects (verb GET, not LIST or WATCH) of
 * ROUTED_RESOURCES, by resource, from its `/metrics`: every client's (the kubelet's, the
 * controller-manager's, the controller's), not only sless's.
 */
export async function apiServerObjectReads(http: KubeHttp): Promise<Record<string, number>> {
  const text = await http.raw('GET', '/metrics');
  const counts: Record<string, number> = Object.fromEntries(ROUTED_RESOURCES.map((r) => [r, 0]));
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
    if (!/(^|,)verb="GET"/.test(labels)) continue;
    const resource = /(^|,)resource="([^"]*)"/.exec(labels)?.[2] ?? '';
    if (!(resource in counts)) continue;
    counts[resource] = (counts[resource] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return counts;
}

export function readsBetween(
  from: Record<string, number>,
  to: Record<string, number>,
): { total: number; byResource: Record<string, number> } {
  const byResource: Record<string, number> = {};
  let total = 0;
  for (const r of ROUTED_RESOURCES) {
    byResource[r] = (to[r] ?? 0) - (from[r] ?? 0);
    total += byResource[r];
  }
  return { total, byResource };
}
