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
 */

import type { Logger } from 'pino';
import { DEFAULT_STABLE_WINDOW_SEC } from '../../core/autoscale.js';
import { replicasOf } from '../../core/defaults.js';
import { asError } from '../../core/errors.js';
import type { EventRecorder, ObjectStore } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import { FIELD_MANAGER, type SlessFunction } from '../../core/resources.js';
import { Reason } from '../../core/status.js';
import { addressOrigin, readyAddressesOf } from './endpoints.js';
import { isStatus, type KubeHttp, MERGE_PATCH } from './http.js';
import { LABEL_COMPONENT, LABEL_FUNCTION, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { type KubeObject, listObjects } from './objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE, objectPath, POD } from './resource-types.js';
import { podFailureReason, replicasOwners } from './rollout.js';
import type { KubeRouteCache } from './route-cache.js';
import { serviceName } from './workload-manifests.js';

/** The field manager of `spec.replicas` once a function scaled: never the controller's own. */
export const SCALER_MANAGER = 'sless-scaler';
/** When some replica of sless last served a request for the function (ISO time). */
export const ANNOTATION_LAST_REQUEST = 'sless.dev/last-request';

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
    const key = objectKey(namespace, name);
    const max = this.options.maxHeldPerFunction ?? 1000;
    let activation = this.activations.get(key);
    if (activation && activation.held >= max)
      throw new ActivationError(
        `function ${key} is starting from zero and already holds ${max} requests; try again`,
      );
    if (!activation) {
      const created: Activation = { held: 0, done: Promise.resolve('') };
      created.done = this.run(fn).finally(() => {
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

  private async run(fn: SlessFunction): Promise<string> {
    const { namespace, name } = fn.metadata;
    const key = objectKey(namespace, name);
    const own = fn.spec.scaleToZero?.activationTimeoutSec;
    const timeoutMs = own !== undefined ? own * 1000 : (this.options.activationTimeoutMs ?? 60_000);
    const deadline = Date.now() + timeoutMs;
    this.noteRequest(fn);
    if (await this.scaleUp(fn)) {
      this.scaleUps.set(key, (this.scaleUps.get(key) ?? 0) + 1);
      this.options.logger.info({ function: key }, 'scaled up from zero for a held request');
      this.options.events?.record(fn, 'Normal', Reason.ScaledUp, 'scaled up from zero for a request');
    }
    for (;;) {
      const origin =
        (await this.readyEndpoint(namespace, name)) ?? (await this.answeringPod(namespace, name));
      if (origin) return origin;
      if (Date.now() >= deadline) {
        const pods = await listObjects<KubeObject>(this.options.http, POD, {
          namespace,
          labels: { [LABEL_FUNCTION]: name },
        }).catch(() => ({ items: [] as KubeObject[] }));
        const why = podFailureReason(pods.items) || 'no pod became ready';
        throw new ActivationError(
          `function ${key} did not start within ${Math.round(timeoutMs / 1000)}s: ${why}`,
        );
      }
      await new Promise((r) => setTimeout(r, this.options.pollMs ?? 100));
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

  /** A ready endpoint of the function's Service, as `http://ip:port`; round robin over several. */
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
    return addressOrigin(ready[this.nextIndex(objectKey(namespace, name), ready.length)] as string);
  }

  /**
   * A running pod of the function whose runtime already answers `/healthz`, asked directly (as
   * Knative's activator probes pods): the kubelet probes readiness at 1 s granularity and the
   * EndpointSlice follows after that, which held requests need not wait for.
   */
  private async answeringPod(namespace: string, name: string): Promise<string | undefined> {
    const pods = await listObjects<KubeObject>(this.options.http, POD, {
      namespace,
      labels: { [LABEL_FUNCTION]: name, [LABEL_COMPONENT]: 'function' },
    }).catch(() => ({ items: [] as KubeObject[] }));
    const candidates = pods.items
      .filter((pod) => !pod.metadata.deletionTimestamp)
      .map((pod) => pod.status as PodStatus | undefined)
      .filter((status) => status?.podIP && status.containerStatuses?.every((c) => c.state?.running))
      .map((status) => status?.podIP as string)
      .sort();
    for (const ip of candidates) {
      const origin = this.options.podOrigin?.(ip) ?? addressOrigin(ip);
      const answered = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(500) })
        .then(async (res) => {
          await res.body?.cancel();
          return res.status === 200;
        })
        .catch(() => false);
      if (answered) return origin;
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
    const activity = this.noteRequest(fn);
    activity.inflight++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      activity.inflight--;
      this.noteRequest(fn);
    };
  }

  private noteRequest(fn: SlessFunction): Activity {
    const key = objectKey(fn.metadata.namespace, fn.metadata.name);
    const now = Date.now();
    let activity = this.activity.get(key);
    if (!activity) {
      activity = { last: now, inflight: 0, published: 0 };
      this.activity.set(key, activity);
    }
    activity.last = now;
    const idleMs = (idleSecondsOf(fn) ?? 300) * 1000;
    if (now - activity.published >= Math.max(idleMs / 4, 250)) {
      activity.published = now;
      void this.publish(fn, now);
    }
    return activity;
  }

  /** Tells the other replicas (and the leader) that this one served the function just now. */
  private async publish(fn: SlessFunction, at: number): Promise<void> {
    const { namespace, name } = fn.metadata;
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

interface PodStatus {
  podIP?: string;
  containerStatuses?: { state?: { running?: unknown } }[];
}
