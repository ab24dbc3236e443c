/**
 * Which function pods answer now, by function and revision: the ones the kubelet calls Ready, and the
 * ones that started and answer `/healthz` when asked directly, before the kubelet's probe said so.
 * The kubelet probes at 1 s granularity and the EndpointSlice follows after that; a rollout need not
 * wait for either to move `/fn/` to a new pod that already answers (Knative's activator probes pods
 * itself for the same reason). A pod is asked only while its startup probe has not passed; once the
 * kubelet has called it Ready, or passed it into readiness probing, its verdict is the one kept.
 */
import { objectKey } from '../../core/object-key.js';
import { addressOrigin } from './endpoints.js';
import { ANNOTATION_REVISION, LABEL_FUNCTION } from './labels.js';
import type { KubeObject } from './objects.js';

/** A started pod is asked this often until it answers, then every SLOW_PROBE_MS after a while. */
const PROBE_MS = 100;
const SLOW_PROBE_MS = 500;
const SLOW_AFTER_MS = 5_000;
/** The kubelet restarts a container that takes longer than its startup budget: asking stops then. */
const PROBE_BUDGET_MS = 70_000;
const PROBE_TIMEOUT_MS = 500;

export type PodsAnsweringListener = (namespace: string, fn: string) => void;

interface PodStatus {
  phase?: string;
  podIP?: string;
  conditions?: { type?: string; status?: string }[];
  containerStatuses?: { state?: { running?: unknown }; restartCount?: number; started?: boolean }[];
}

interface Tracked {
  namespace: string;
  fn: string;
  revision: string;
  ip: string;
  restarts: number;
  answers: boolean;
  /** The kubelet called it Ready once: from then on its verdict decides. */
  seenReady: boolean;
  /** Asking now; `probingSince` stays once asking ended, so a pod past its budget is not asked again. */
  probing: boolean;
  probingSince?: number;
  timer?: NodeJS.Timeout;
}

export interface StartingPodsOptions {
  /** Whether the pod at `origin` answers `/healthz` now; by default a GET with a short timeout. */
  probe?: (origin: string) => Promise<boolean>;
  /** Where a pod at `address` answers (tests map pod addresses); by default its IP and the runtime port. */
  origin?: (address: string) => string;
}

export class StartingPods {
  private readonly pods = new Map<string, Tracked>();
  /** The same entries by `namespace/function`: the route cache asks per function. */
  private readonly byFunction = new Map<string, Set<Tracked>>();
  private readonly listeners = new Set<PodsAnsweringListener>();
  private readonly probe: (origin: string) => Promise<boolean>;
  private readonly origin: (address: string) => string;
  private stopped = false;

  constructor(options: StartingPodsOptions = {}) {
    this.probe = options.probe ?? healthzAnswers;
    this.origin = options.origin ?? addressOrigin;
  }

  /** Told whenever the pods that answer for a function change. */
  onChange(listener: PodsAnsweringListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A function pod as a watch saw it (`removed`: it is gone). */
  observe(pod: KubeObject, removed: boolean): void {
    const namespace = pod.metadata.namespace;
    const key = objectKey(namespace ?? '', pod.metadata.name);
    const fn = pod.metadata.labels?.[LABEL_FUNCTION];
    const revision = pod.metadata.annotations?.[ANNOTATION_REVISION];
    const status = (pod.status ?? {}) as PodStatus;
    const started =
      !removed &&
      !pod.metadata.deletionTimestamp &&
      status.phase === 'Running' &&
      status.podIP !== undefined &&
      (status.containerStatuses?.length ?? 0) > 0 &&
      status.containerStatuses?.every((c) => c.state?.running !== undefined) === true;
    const before = this.pods.get(key);
    if (!started || namespace === undefined || fn === undefined || revision === undefined) {
      if (before) this.forget(key, before);
      return;
    }
    const ip = status.podIP as string;
    const restarts = (status.containerStatuses ?? []).reduce((sum, c) => sum + (c.restartCount ?? 0), 0);
    let tracked = before;
    if (!tracked || tracked.ip !== ip || tracked.revision !== revision || tracked.restarts !== restarts) {
      if (tracked) this.forget(key, tracked);
      tracked = { namespace, fn, revision, ip, restarts, answers: false, seenReady: false, probing: false };
      this.pods.set(key, tracked);
      const fnKey = objectKey(namespace, fn);
      let ofFunction = this.byFunction.get(fnKey);
      if (!ofFunction) {
        ofFunction = new Set();
        this.byFunction.set(fnKey, ofFunction);
      }
      ofFunction.add(tracked);
    }
    const ready = status.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    if (ready) {
      this.stopProbing(tracked);
      tracked.seenReady = true;
      this.set(tracked, true);
    } else if (tracked.seenReady) {
      // The kubelet took its readiness back: its probe failed, so asking again would overrule it.
      this.stopProbing(tracked);
      this.set(tracked, false);
    } else if (
      !tracked.answers &&
      tracked.probingSince === undefined &&
      // Only while the kubelet's startup probe has yet to pass: once it has, readiness is the
      // kubelet's to judge (a pod first seen by a restarted controller, failing its probe, stays out).
      status.containerStatuses?.some((c) => c.started !== true)
    ) {
      this.ask(key, tracked);
    }
  }

  /** The addresses of the pods of `fn` running `revision` that answer, sorted. */
  answering(namespace: string, fn: string, revision: string): string[] {
    const found: string[] = [];
    for (const pod of this.byFunction.get(objectKey(namespace, fn)) ?? [])
      if (pod.answers && pod.revision === revision) found.push(pod.ip);
    return found.sort();
  }

  stop(): void {
    this.stopped = true;
    for (const pod of this.pods.values()) this.stopProbing(pod);
    this.pods.clear();
    this.byFunction.clear();
    this.listeners.clear();
  }

  private ask(key: string, tracked: Tracked): void {
    tracked.probing = true;
    tracked.probingSince = Date.now();
    const attempt = async (): Promise<void> => {
      tracked.timer = undefined;
      const answered = await this.probe(this.origin(tracked.ip));
      // The pod may have moved on while it was asked: only the same entry, still asking, counts.
      if (this.stopped || this.pods.get(key) !== tracked || !tracked.probing) return;
      const waited = Date.now() - (tracked.probingSince ?? Date.now());
      if (answered || waited >= PROBE_BUDGET_MS) {
        tracked.probing = false;
        if (answered) this.set(tracked, true);
        return;
      }
      tracked.timer = setTimeout(attempt, waited >= SLOW_AFTER_MS ? SLOW_PROBE_MS : PROBE_MS);
      tracked.timer.unref();
    };
    void attempt();
  }

  private set(tracked: Tracked, answers: boolean): void {
    if (tracked.answers === answers) return;
    tracked.answers = answers;
    this.tell(tracked);
  }

  private forget(key: string, tracked: Tracked): void {
    this.stopProbing(tracked);
    this.pods.delete(key);
    const fnKey = objectKey(tracked.namespace, tracked.fn);
    const ofFunction = this.byFunction.get(fnKey);
    ofFunction?.delete(tracked);
    if (ofFunction?.size === 0) this.byFunction.delete(fnKey);
    if (tracked.answers) this.tell(tracked);
  }

  private stopProbing(tracked: Tracked): void {
    tracked.probing = false;
    if (tracked.timer !== undefined) clearTimeout(tracked.timer);
    tracked.timer = undefined;
  }

  private tell(tracked: Tracked): void {
    for (const listener of this.listeners) listener(tracked.namespace, tracked.fn);
  }
}

/** Whether `origin/healthz` answers 200 within PROBE_TIMEOUT_MS. */
export async function healthzAnswers(origin: string): Promise<boolean> {
  try {
    const res = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}
