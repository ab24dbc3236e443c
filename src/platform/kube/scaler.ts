/**
 * Scale to zero on kube, with the `/fn/` proxy as the activator (as Knative's activator and the
 * OpenFaaS gateway do it):
 *
 * - `activate`: a request for a function with no ready endpoint is held (a bounded number per
 *   function, for a bounded time) while the Deployment is scaled up through its scale subresource;
 *   the held requests go on once an endpoint is ready. Concurrent requests share one activation, and
 *   the scale-up is a compare-and-swap on the Deployment's resourceVersion, so however many replicas
 *   of sless hold requests at once, exactly one of them scales.
 * - `sweep` (only where `isLeader` says so): a function idle for its `scaleToZero.idleSeconds` is
 *   scaled back to 0, again as a compare-and-swap, so a request noted meanwhile wins.
 *
 * Idleness must be known across replicas: each replica notes its requests on the Deployment
 * (`sless.dev/last-request`, at most every quarter of the idle time), and the leader reads that
 * beside its own. Once the scaler has set `spec.replicas`, the controller's apply leaves the field
 * out (see KubeWorkloads.deploy), so the two never fight over it.
 *
 * A commit revision (commit-revisions.ts) is held for the same way, through `activateDeployment`,
 * and noted the same way on its own Deployment; the leader's sweep deletes it once idle, and the
 * least recently used beyond a few per function. Deleted, not scaled to 0: garbage collection keeps
 * every build whose image a function Deployment names, so one left at zero would pin its build.
 * Idleness is read from the annotation, so a restart or a new leader still cleans them up.
 */

import type { Logger } from 'pino';
import { DEFAULT_STABLE_WINDOW_SEC } from '../../core/autoscale.js';
import { replicasOf } from '../../core/defaults.js';
import { asError } from '../../core/errors.js';
import type { EventRecorder, ObjectStore } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import { FIELD_MANAGER, type SlessFunction } from '../../core/resources.js';
import { Reason } from '../../core/status.js';
import { commitRevisionOf } from './commit-manifests.js';
import { addressOrigin, readyAddressesOf } from './endpoints.js';
import { isStatus, type KubeHttp, MERGE_PATCH } from './http.js';
import {
  ANNOTATION_LAST_REQUEST,
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from './labels.js';
import { deleteObject, type KubeObject, listObjects } from './objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE, objectPath, POD, SERVICE } from './resource-types.js';
import { podFailureReason, replicasOwners } from './rollout.js';
import type { KubeRouteCache } from './route-cache.js';
import { healthzAnswers } from './starting-pods.js';
import { serviceName } from './workload-manifests.js';

/** The field manager of `spec.replicas` once a function scaled: never the controller's own. */
export const SCALER_MANAGER = 'sless-scaler';
export { ANNOTATION_LAST_REQUEST };
/** How long an unused commit revision runs without `scaleToZero.idleSeconds` (as on the local platform). */
export const COMMIT_IDLE_SECONDS = 60;
/** Commit revisions of one function running at once (as on the local platform). */
export const COMMIT_REVISIONS_PER_FUNCTION = 3;

export interface ScalerOptions {
  http: KubeHttp;
  store: ObjectStore;
  /**
   * The Functions as a watch last saw them (undefined while it has not listed yet): the idle sweep
   * reads them instead of listing every Function from the API server every few seconds.
   */
  cachedFunctions?: (keep: (fn: SlessFunction) => boolean) => SlessFunction[] | undefined;
  /**
   * Deployments and EndpointSlices as the informers hold them: ready endpoints and the idle sweep are
   * read from memory instead of listing them from the API server.
   */
  cache?: KubeRouteCache;
  logger: Logger;
  events?: EventRecorder;
  /** Whether this replica runs the idle scale-down; any replica holds requests and scales up. */
  isLeader?: () => boolean;
  /**
   * How long a held request waits for a ready endpoint before a 503 (default 60 s), unless the
   * function sets its own `scaleToZero.activationTimeoutSec`.
   */
  activationTimeoutMs?: number;
  /** How many requests one function may hold while it starts (default 1000); more get a 503. */
  maxHeldPerFunction?: number;
  /** How often a starting function's endpoints are read (default 100 ms). */
  pollMs?: number;
  /**
   * Where a started pod's runtime answers (default `http://{podIP}:8080`); tests point it at a local
   * server.
   */
  podOrigin?: (podIp: string) => string;
  /** Where a ready endpoint's address answers (default `http://{address}:8080`); tests: local servers. */
  endpointOrigin?: (address: string) => string;
  /** How often the leader looks for idle functions (default 5 s: each look lists the Functions). */
  sweepMs?: number;
  /** Namespaces whose functions are scaled; all when absent. */
  namespaces?: readonly string[];
}

/** Why a held request cannot go on: said in the 503's body. */
export class ActivationError extends Error {}

interface Activity {
  /** Last request start or end seen by this replica (ms). */
  last: number;
  inflight: number;
  published: number;
}

interface Activation {
  held: number;
  done: Promise<string>;
}

/** One Deployment a held request waits for: the function's own, or a commit revision's. */
export interface ActivationTarget {
  namespace: string;
  /** The Deployment's name; its Service is `serviceName` of it. */
  deployment: string;
  /** What selects its pods, to ask them directly and to say why none became ready. */
  podLabels: Record<string, string>;
  timeoutMs: number;
  /** How the 503 names what did not start: `ns/name` or `ns/name@commit`. */
  label: string;
}

interface Scale {
  metadata: { resourceVersion?: string };
  spec?: { replicas?: number };
}

/**
 * How long the function may be idle before it goes to zero: its `scaleToZero.idleSeconds`, or for
 * `scale.min: 0` the stable window of its autoscaling (zero is the idle scale-down's decision, and
 * the way back is the activator's, with or without autoscaling).
 */
export function idleSecondsOf(fn: SlessFunction): number | undefined {
  const { scaleToZero, scale } = fn.spec;
  if (scaleToZero) return scaleToZero.idleSeconds;
  return scale?.min === 0 ? (scale.stableWindowSec ?? DEFAULT_STABLE_WINDOW_SEC) : undefined;
}

/** Whether the scaler (scale to zero or autoscaling) sets the Deployment's replicas, not the apply. */
export function scalerOwnsReplicas(fn: SlessFunction): boolean {
  return idleSecondsOf(fn) !== undefined || fn.spec.scale !== undefined;
}

/** How long an unused commit revision of the function keeps running. */
export function commitIdleSecondsOf(fn: SlessFunction): number {
  return fn.spec.scaleToZero?.idleSeconds ?? COMMIT_IDLE_SECONDS;
}

export class KubeScaler {
  private readonly options: ScalerOptions;
  private readonly activations = new Map<string, Activation>();
  private readonly activity = new Map<string, Activity>();
  /** When this replica first saw a function running without any request noted (ms). */
  private readonly runningSince = new Map<string, number>();
  private readonly scaleUps = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping = false;

  constructor(options: ScalerOptions) {
    this.options = options;
  }

  start(): void {
    const every = this.options.sweepMs ?? 5000;
    const tick = () => {
      this.timer = setTimeout(async () => {
        await this.sweep();
        if (this.timer) tick();
      }, every);
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** How many times this replica scaled the function up from zero. */
  scaleUpsOf(namespace: string, name: string): number {
    return this.scaleUps.get(objectKey(namespace, name)) ?? 0;
  }

  /**
   * Holds the caller until the function has a ready endpoint, scaling it up if nobody has; resolves
   * with that endpoint's origin. Rejects with an ActivationError when the queue is full or no endpoint
   * is ready in time.
   */
  async activate(fn: SlessFunction): Promise<string> {
    const { namespace, name } = fn.metadata;
    return this.activateDeployment(
      {
        namespace,
        deployment: name,
        podLabels: { [LABEL_FUNCTION]: name, [LABEL_COMPONENT]: 'function' },
        timeoutMs: this.activationTimeoutMsOf(fn),
        label: objectKey(namespace, name),
      },
      () => this.wake(fn),
    );
  }

  /** The function's own `scaleToZero.activationTimeoutSec`, or the default. */
  activationTimeoutMsOf(fn: SlessFunction): number {
    const own = fn.spec.scaleToZero?.activationTimeoutSec;
    return own !== undefined ? own * 1000 : (this.options.activationTimeoutMs ?? 60_000);
  }

  /**
   * Holds the caller until `target` has a ready endpoint, running `start` once for every request
   * held at the same time (concurrent requests share one activation); resolves with the endpoint's
   * origin. Rejects with an ActivationError when the queue is full or no endpoint is ready in time.
   */
  async activateDeployment(target: ActivationTarget, start: () => Promise<void>): Promise<string> {
    const key = objectKey(target.namespace, target.deployment);
    const max = this.options.maxHeldPerFunction ?? 1000;
    let activation = this.activations.get(key);
    if (activation && activation.held >= max)
      throw new ActivationError(
        `function ${target.label} is starting from zero and already holds ${max} requests; try again`,
      );
    if (!activation) {
      const created: Activation = { held: 0, done: Promise.resolve('') };
      created.done = this.run(target, start).finally(() => {
        if (this.activations.get(key) === created) this.activations.delete(key);
      });
      this.activations.set(key, created);
      activation = created;
    }
    activation.held++;
    try {
      return await activation.done;
    } finally {
      activation.held--;
    }
  }

  private async run(target: ActivationTarget, start: () => Promise<void>): Promise<string> {
    const { namespace, deployment, podLabels, timeoutMs } = target;
    const deadline = Date.now() + timeoutMs;
    await start();
    for (;;) {
      const origin =
        (await this.readyEndpoint(namespace, deployment)) ?? (await this.answeringPod(namespace, podLabels));
      if (origin) return origin;
      if (Date.now() >= deadline) {
        const pods = await listObjects<KubeObject>(this.options.http, POD, {
          namespace,
          labels: podLabels,
        }).catch(() => ({ items: [] as KubeObject[] }));
        const why = podFailureReason(pods.items) || 'no pod became ready';
        throw new ActivationError(
          `function ${target.label} did not start within ${Math.round(timeoutMs / 1000)}s: ${why}`,
        );
      }
      await new Promise((r) => setTimeout(r, this.options.pollMs ?? 100));
    }
  }

  /** A function at zero: its request noted, its Deployment scaled up unless someone did already. */
  private async wake(fn: SlessFunction): Promise<void> {
    const key = objectKey(fn.metadata.namespace, fn.metadata.name);
    this.noteRequest(fn);
    if (await this.scaleUp(fn)) {
      this.scaleUps.set(key, (this.scaleUps.get(key) ?? 0) + 1);
      this.options.logger.info({ function: key }, 'scaled up from zero for a held request');
      this.options.events?.record(fn, 'Normal', Reason.ScaledUp, 'scaled up from zero for a request');
    }
  }

  /**
   * Sets replicas from 0 to the function's count through the scale subresource, only if they are
   * still 0 at the resourceVersion read: true when this call scaled. Already running (another
   * replica scaled, a rollout is under way): false, and the caller just waits for the endpoint.
   */
  private async scaleUp(fn: SlessFunction): Promise<boolean> {
    const { namespace, name } = fn.metadata;
    for (let attempt = 0; attempt < 10; attempt++) {
      const scale = await this.readScale(namespace, name);
      if (!scale) throw new ActivationError(`function ${namespace}/${name} has no Deployment yet`);
      if ((scale.spec?.replicas ?? 0) > 0) return false;
      if (await this.writeScale(namespace, name, scale, replicasOf(fn))) return true;
    }
    return false;
  }

  private readScale(namespace: string, name: string): Promise<Scale | undefined> {
    return this.options.http
      .request<Scale>('GET', objectPath(DEPLOYMENT, namespace, name, 'scale'))
      .catch((error: unknown) => {
        if (isStatus(error, 404)) return undefined;
        throw error;
      });
  }

  /** A compare-and-swap: false when the Deployment changed since `scale` was read. */
  private async writeScale(
    namespace: string,
    name: string,
    scale: Scale,
    replicas: number,
  ): Promise<boolean> {
    try {
      // A merge patch that carries the resourceVersion is refused (409) when it is stale.
      await this.options.http.request('PATCH', objectPath(DEPLOYMENT, namespace, name, 'scale'), {
        query: { fieldManager: SCALER_MANAGER },
        contentType: MERGE_PATCH,
        body: { metadata: { resourceVersion: scale.metadata.resourceVersion }, spec: { replicas } },
      });
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }

  /**
   * A ready endpoint of the Service of Deployment `name` (a function's, or a commit revision's), as
   * `http://ip:port`; round robin over several.
   */
  async readyEndpoint(namespace: string, name: string): Promise<string | undefined> {
    const cache = this.options.cache;
    const ready = cache
      ? cache.readyAddresses(namespace, name)
      : readyAddressesOf(
          (
            await listObjects<KubeObject>(this.options.http, ENDPOINT_SLICE, {
              namespace,
              labels: { 'kubernetes.io/service-name': serviceName(name) },
            })
          ).items,
        );
    if (ready.length === 0) return undefined;
    const address = ready[this.nextIndex(objectKey(namespace, name), ready.length)] as string;
    return (this.options.endpointOrigin ?? addressOrigin)(address);
  }

  /**
   * A running pod of the function whose runtime already answers `/healthz`, asked directly (as
   * Knative's activator probes pods): the kubelet probes readiness at 1 s granularity and the
   * EndpointSlice follows after that, which held requests need not wait for.
   */
  private async answeringPod(namespace: string, labels: Record<string, string>): Promise<string | undefined> {
    const pods = await listObjects<KubeObject>(this.options.http, POD, { namespace, labels }).catch(() => ({
      items: [] as KubeObject[],
    }));
    const candidates = pods.items
      .filter((pod) => !pod.metadata.deletionTimestamp)
      .map((pod) => pod.status as PodStatus | undefined)
      .filter((status) => status?.podIP && status.containerStatuses?.every((c) => c.state?.running))
      .map((status) => status?.podIP as string)
      .sort();
    for (const ip of candidates) {
      const origin = this.options.podOrigin?.(ip) ?? addressOrigin(ip);
      if (await healthzAnswers(origin)) return origin;
    }
    return undefined;
  }

  private readonly roundRobin = new Map<string, number>();
  private nextIndex(key: string, size: number): number {
    const next = ((this.roundRobin.get(key) ?? -1) + 1) % size;
    this.roundRobin.set(key, next);
    return next;
  }

  /** A request for the function starts here; the returned function marks its end. */
  requestStarted(fn: SlessFunction): () => void {
    return this.requestStartedOn(fn.metadata.namespace, fn.metadata.name, idleSecondsOf(fn) ?? 300);
  }

  /** A request served by Deployment `deployment` starts here; the returned function marks its end. */
  requestStartedOn(namespace: string, deployment: string, idleSeconds: number): () => void {
    const activity = this.noteRequestOn(namespace, deployment, idleSeconds);
    activity.inflight++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      activity.inflight--;
      this.noteRequestOn(namespace, deployment, idleSeconds);
    };
  }

  private noteRequest(fn: SlessFunction): Activity {
    return this.noteRequestOn(fn.metadata.namespace, fn.metadata.name, idleSecondsOf(fn) ?? 300);
  }

  private noteRequestOn(namespace: string, deployment: string, idleSeconds: number): Activity {
    const key = objectKey(namespace, deployment);
    const now = Date.now();
    let activity = this.activity.get(key);
    if (!activity) {
      activity = { last: now, inflight: 0, published: 0 };
      this.activity.set(key, activity);
    }
    activity.last = now;
    const idleMs = idleSeconds * 1000;
    if (now - activity.published >= Math.max(idleMs / 4, 250)) {
      activity.published = now;
      void this.publish(namespace, deployment, now);
    }
    return activity;
  }

  /** Tells the other replicas (and the leader) that this one served Deployment `name` just now. */
  private async publish(namespace: string, name: string, at: number): Promise<void> {
    try {
      await this.options.http.request('PATCH', objectPath(DEPLOYMENT, namespace, name), {
        query: { fieldManager: SCALER_MANAGER },
        contentType: MERGE_PATCH,
        body: { metadata: { annotations: { [ANNOTATION_LAST_REQUEST]: new Date(at).toISOString() } } },
      });
    } catch (error) {
      if (!isStatus(error, 404))
        this.options.logger.debug(
          { function: objectKey(namespace, name), err: asError(error).message },
          'cannot note the last request on the Deployment',
        );
    }
  }

  /** One pass of the idle scale-down; does nothing where this replica is not the leader. */
  async sweep(): Promise<void> {
    if (this.sweeping || !(this.options.isLeader?.() ?? true)) return;
    this.sweeping = true;
    try {
      await this.sweepCommitRevisions();
    } catch (error) {
      this.options.logger.warn({ err: asError(error).message }, 'commit revision sweep failed');
    }
    try {
      const functions = new Map<string, SlessFunction>();
      const scalesToZero = (fn: SlessFunction) => idleSecondsOf(fn) !== undefined;
      const all = this.options.cachedFunctions?.(scalesToZero) ?? (await this.options.store.list('Function'));
      for (const fn of all)
        if (scalesToZero(fn)) functions.set(objectKey(fn.metadata.namespace, fn.metadata.name), fn);
      for (const key of this.runningSince.keys()) if (!functions.has(key)) this.runningSince.delete(key);
      if (functions.size === 0) return;
      const namespaces = this.options.namespaces ?? [
        ...new Set([...functions.values()].map((fn) => fn.metadata.namespace)),
      ];
      const cache = this.options.cache;
      if (cache?.synced()) {
        for (const deployment of [...cache.allDeployments()]) {
          const fn = functions.get(objectKey(deployment.metadata.namespace ?? '', deployment.metadata.name));
          if (fn) await this.scaleDownIfIdle(fn, deployment);
        }
        return;
      }
      for (const namespace of namespaces) {
        const deployments = await listObjects<KubeObject>(this.options.http, DEPLOYMENT, {
          namespace,
          labels: { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function' },
        });
        for (const deployment of deployments.items) {
          const fn = functions.get(objectKey(namespace, deployment.metadata.name));
          if (fn) await this.scaleDownIfIdle(fn, deployment);
        }
      }
    } catch (error) {
      this.options.logger.warn({ err: asError(error).message }, 'idle scale-down pass failed');
    } finally {
      this.sweeping = false;
    }
  }

  /**
   * Deletes each commit revision idle for its function's time (or whose Function is gone or disabled), then the
   * least recently used ones beyond the per-function limit. One that this replica holds a request
   * for, or serves one through, stays.
   */
  private async sweepCommitRevisions(): Promise<void> {
    const cache = this.options.cache;
    let deployments: KubeObject[];
    if (cache?.synced()) deployments = [...cache.allDeployments()];
    else {
      deployments = [];
      for (const namespace of this.options.namespaces ?? [undefined]) {
        const list = await listObjects<KubeObject>(this.options.http, DEPLOYMENT, {
          ...(namespace ? { namespace } : {}),
          labels: { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function' },
        });
        deployments.push(...list.items);
      }
    }
    const byFunction = new Map<string, KubeObject[]>();
    for (const deployment of deployments) {
      const of = commitRevisionOf(deployment);
      if (!of || deployment.metadata.deletionTimestamp) continue;
      const key = objectKey(deployment.metadata.namespace ?? '', of.fn);
      byFunction.set(key, [...(byFunction.get(key) ?? []), deployment]);
    }
    if (byFunction.size === 0) return;
    const now = Date.now();
    for (const group of byFunction.values()) {
      const first = group[0] as KubeObject;
      const namespace = first.metadata.namespace ?? '';
      const fnName = commitRevisionOf(first)?.fn ?? '';
      const fn = cache?.synced()
        ? cache.fn(namespace, fnName)
        : await this.options.store.get('Function', namespace, fnName);
      // A disabled function serves nothing, by commit neither: its revisions go at once.
      const live = fn && fn.status?.phase !== 'Disabled';
      const idleMs = live ? commitIdleSecondsOf(fn) * 1000 : 0;
      const kept = [];
      for (const entry of this.commitEntries(group))
        if (!entry.busy && now - entry.lastActive >= idleMs)
          await this.deleteCommitRevision(entry.deployment, live ? 'idle' : 'function gone or disabled');
        else kept.push(entry);
      await this.trimCommitRevisions(kept, COMMIT_REVISIONS_PER_FUNCTION);
    }
  }

  /**
   * Before a new commit revision of the function starts (on any replica): the least recently used
   * go until it has room, so calling many old commits at once never runs more than a few.
   */
  async makeRoomForCommit(namespace: string, fnName: string, starting: string): Promise<void> {
    const cache = this.options.cache;
    if (!cache?.synced()) return;
    const group = [...cache.allDeployments()].filter(
      (d) =>
        d.metadata.namespace === namespace &&
        d.metadata.name !== starting &&
        !d.metadata.deletionTimestamp &&
        commitRevisionOf(d)?.fn === fnName,
    );
    await this.trimCommitRevisions(this.commitEntries(group), COMMIT_REVISIONS_PER_FUNCTION - 1);
  }

  /** A function's commit revisions, least recently used first, with what this replica knows of them. */
  private commitEntries(group: readonly KubeObject[]): CommitEntry[] {
    return group
      .map((deployment) => {
        const key = objectKey(deployment.metadata.namespace ?? '', deployment.metadata.name);
        const local = this.activity.get(key);
        const noted = Date.parse(deployment.metadata.annotations?.[ANNOTATION_LAST_REQUEST] ?? '') || 0;
        const created = Date.parse(deployment.metadata.creationTimestamp ?? '') || 0;
        return {
          deployment,
          lastActive: Math.max(local?.last ?? 0, noted, created),
          busy: (local?.inflight ?? 0) > 0 || this.activations.has(key),
        };
      })
      .sort((a, b) => a.lastActive - b.lastActive);
  }

  /** Deletes the least recently used of `entries` (sorted so) beyond `max`; busy ones stay. */
  private async trimCommitRevisions(entries: readonly CommitEntry[], max: number): Promise<void> {
    let over = entries.length - max;
    for (const entry of entries) {
      if (over <= 0) break;
      if (entry.busy) continue;
      await this.deleteCommitRevision(entry.deployment, 'least recently used');
      over--;
    }
  }

  /**
   * Deletes a commit revision's Deployment, only at the resourceVersion read (a request noted by
   * another replica meanwhile wins, as for the scale to zero), then its Service.
   */
  private async deleteCommitRevision(deployment: KubeObject, why: string): Promise<void> {
    const namespace = deployment.metadata.namespace ?? '';
    const { name } = deployment.metadata;
    const of = commitRevisionOf(deployment);
    try {
      await this.options.http.request('DELETE', objectPath(DEPLOYMENT, namespace, name), {
        body: {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          propagationPolicy: 'Background',
          preconditions: { resourceVersion: deployment.metadata.resourceVersion },
        },
      });
    } catch (error) {
      if (isStatus(error, 409)) return;
      if (!isStatus(error, 404)) throw error;
    }
    await deleteObject(this.options.http, SERVICE, namespace, serviceName(name));
    this.activity.delete(objectKey(namespace, name));
    this.options.logger.info(
      { function: objectKey(namespace, of?.fn ?? ''), commit: of?.commit, why },
      'commit revision stopped',
    );
  }

  private async scaleDownIfIdle(fn: SlessFunction, deployment: KubeObject): Promise<void> {
    const { namespace, name } = fn.metadata;
    const key = objectKey(namespace, name);
    const replicas = (deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1;
    if (replicas === 0) {
      this.runningSince.delete(key);
      return;
    }
    // An HPA or a person scales it (where the API server records it): not ours to stop.
    if (replicasOwners(deployment).some((m) => m !== FIELD_MANAGER && m !== SCALER_MANAGER)) return;
    const now = Date.now();
    if (!this.runningSince.has(key)) this.runningSince.set(key, now);
    const local = this.activity.get(key);
    if ((local?.inflight ?? 0) > 0 || this.activations.has(key)) return;
    const noted = Date.parse(deployment.metadata.annotations?.[ANNOTATION_LAST_REQUEST] ?? '') || 0;
    const lastActive = Math.max(local?.last ?? 0, noted, this.runningSince.get(key) ?? now);
    const idleSeconds = idleSecondsOf(fn) ?? 0;
    if (now - lastActive < idleSeconds * 1000) return;
    const scale: Scale = { metadata: { resourceVersion: deployment.metadata.resourceVersion ?? '' } };
    if (!(await this.writeScale(namespace, name, scale, 0))) return;
    this.runningSince.delete(key);
    this.options.logger.info({ function: key, idleSeconds }, 'scaled to zero after idle');
    this.options.events?.record(
      fn,
      'Normal',
      Reason.ScaledToZero,
      `scaled to zero after ${idleSeconds}s without requests`,
    );
  }
}

interface CommitEntry {
  deployment: KubeObject;
  /** The last request noted by any replica, or its creation (ms). */
  lastActive: number;
  /** This replica holds or serves a request for it now. */
  busy: boolean;
}

interface PodStatus {
  podIP?: string;
  containerStatuses?: { state?: { running?: unknown } }[];
}
