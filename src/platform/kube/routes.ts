/**
 * `/fn/{ns}/{name}` → the function's pods, only while a revision serves (`status.servingRevision`,
 * whatever Ready says of the newest revision), and while its Deployment has an available replica. An
 * always-on function's requests go to the ready endpoints of its Service (from its EndpointSlices)
 * whose pods run the serving revision (and to its pods that answer before the kubelet calls them
 * ready, see starting-pods.ts), each to the one with the fewest of this proxy's requests in
 * flight: kept-alive connections to the Service address stay with the pod they reached (kube-proxy
 * balances connections, not requests), so pods added under load got little of it. A slice lists a
 * rolling-out revision's ready pods too, which must get nothing before status names it serving. Until
 * an endpoint of the serving revision is known, the Service address serves, as it did before. When
 * the control plane marks pods not ready that still pass the kubelet's probes (the node's lease
 * lapsed, as after an API-server restart), their endpoints serve until a ready one is listed.
 * A function that scales to zero is reached at a ready endpoint of its Service, read the same way:
 * when it runs nothing, the request is held while the scaler starts it (see scaler.ts), and a pod
 * that just became ready is reachable at once, before kube-proxy on any node has learnt of it.
 * An always-on function whose Deployment reports no available replica has its requests held (see
 * replica-wait.ts) until one is available again, within the activation timeout.
 * `/fn/{ns}/{name}@{commit}` is a kept build's own Deployment (commit-revisions.ts), started on demand.
 */

import type { FunctionRoute } from '../../config/kube.js';
import type { CanaryCounts } from '../../core/canary.js';
import { timeoutSecOf } from '../../core/defaults.js';
import { asError } from '../../core/errors.js';
import type {
  AdmissionLimits,
  MirroredCanary,
  RouteResolver,
  RouteState,
  UnavailableRoute,
} from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import { isPreviewOf, noPreviewMessage, previewFunctionName } from '../../core/previews.js';
import type { SlessFunction } from '../../core/resources.js';
import { parseFunctionSegment } from '../../core/revision-ref.js';
import { admissionOf } from '../../proxy/admission.js';
import { CanarySplits } from '../../proxy/canary-split.js';
import { EndpointPickers } from '../../proxy/least-in-flight.js';
import { canaryName, canaryRouteOf } from './canary-manifests.js';
import type { KubeCommitRevisions } from './commit-revisions.js';
import { addressOrigin } from './endpoints.js';
import { FUNCTION_PORT } from './labels.js';
import type { ReplicaWait } from './replica-wait.js';
import type { KubeRouteCache } from './route-cache.js';
import { ActivationError, idleSecondsOf, type KubeScaler } from './scaler.js';
import { serviceName } from './workload-manifests.js';

export interface KubeRouteOptions {
  /** Functions, Deployments, Services and EndpointSlices as the watches hold them: the only source. */
  cache: KubeRouteCache;
  /** How the Service is addressed: its DNS name (default) or its ClusterIP (no cluster DNS needed). */
  route?: FunctionRoute;
  /**
   * Where a function's Service answers; injectable so tests can point at a local server. Given
   * alone, it is where every request goes (endpoints are not used).
   */
  originOf?: (namespace: string, name: string) => string;
  /** Where a pod at an endpoint address answers (default `http://{address}:8080`); tests: local servers. */
  endpointOrigin?: (address: string) => string;
  /** Holds requests for functions at zero and starts them; without it they answer 503. */
  scaler?: KubeScaler;
  /** Counts in-flight requests of functions with `spec.scale`, which its decisions follow. */
  autoscaler?: { requestStarted(fn: SlessFunction): () => void };
  /** How long a request waits for the caches' first lists after a start (default 10 s). */
  syncWaitMs?: number;
  /**
   * Holds requests while an always-on function has no available replica; without it they answer
   * 503 at once.
   */
  replicaWait?: ReplicaWait;
  /** Serves `name@{commit}` from the kept builds; without it such a URL answers 404. */
  commits?: Pick<KubeCommitRevisions, 'resolve'>;
}

export function serviceOrigin(namespace: string, name: string): string {
  return `http://${serviceName(name)}.${namespace}.svc:${FUNCTION_PORT}`;
}

const unavailable = (message: string): UnavailableRoute => ({ state: 'unavailable', status: 503, message });

/** A ready route as the caches give it: where requests go, and nothing counted yet. */
export interface CachedReadyRoute {
  state: 'ready';
  /** The Service's address: where requests go while no endpoint is known. */
  origin: string;
  /** The origins of the serving revision's ready endpoints, sorted; absent while none is known. */
  endpoints?: readonly string[];
  timeoutSec: number;
  revision?: string;
  admission?: AdmissionLimits;
  /** A canary's share of the requests (canaries.ts), with its ready endpoints. */
  canary?: MirroredCanary;
}

/** What the caches say of a plain `/fn/{ns}/{name}`, before anything is counted or started. */
export type CachedRoute =
  | { kind: 'unknown' }
  /** The answer as is: disabled, no serving revision, no Service address. */
  | { kind: 'answer'; route: UnavailableRoute }
  /** Always on, with no available replica now: held for one on the main thread, or this answer. */
  | { kind: 'no-replica'; route: UnavailableRoute }
  /** It scales to zero: the scaler's to reach (and to start), request by request, on the main thread. */
  | { kind: 'at-zero'; fn: SlessFunction }
  /** Always on, with an available replica: its ready endpoints, or its Service. */
  | { kind: 'ready'; fn: SlessFunction; route: CachedReadyRoute };

/**
 * Resolves every request from memory: the informers of `cache` are the only source, so the API
 * server is asked nothing per request, and while it is down the last known routes keep serving. Only
 * a function at zero needs the API server (to scale it up), and says so when it cannot have it.
 */
export class KubeRouteResolver implements RouteResolver {
  private readonly options: KubeRouteOptions;
  /** Endpoint origins by the cache's address list (the same list until its slices change). */
  private readonly originsByAddresses = new WeakMap<readonly string[], readonly string[]>();
  /** Each always-on function's requests in flight per endpoint, through this proxy. */
  private readonly pickers = new EndpointPickers();
  /** Each canary's share of requests and its answers counted, through this proxy. */
  private readonly canaries = new CanarySplits();

  constructor(options: KubeRouteOptions) {
    this.options = options;
  }

  async resolve(namespace: string, name: string): Promise<RouteState> {
    const { cache } = this.options;
    if (!cache.synced() && !(await cache.whenSynced(this.options.syncWaitMs ?? 10_000)))
      return unavailable('routes are not loaded yet: the control plane is unreachable; try again');
    const { name: fnName, ref } = parseFunctionSegment(name) ?? { name };
    if (ref?.kind === 'label') return this.resolvePreview(namespace, fnName, ref.label);
    if (ref) {
      const commits = this.options.commits;
      if (commits)
        return commits.resolve(namespace, fnName, ref.commit, () => this.resolve(namespace, fnName));
      if (!cache.fn(namespace, fnName)) return { state: 'unknown' };
      return {
        state: 'unavailable',
        status: 404,
        message: `function ${namespace}/${fnName}@${ref.commit}: this proxy serves no revisions by commit`,
      };
    }
    const found = this.cached(namespace, name);
    if (found.kind !== 'ready' || !found.route.endpoints) this.pickers.drop(objectKey(namespace, name));
    if (found.kind !== 'ready' || !found.route.canary) this.canaries.drop(objectKey(namespace, name));
    switch (found.kind) {
      case 'unknown':
        return { state: 'unknown' };
      case 'answer':
        return found.route;
      case 'no-replica':
        return this.waitForReplica(namespace, name, found.route);
      case 'at-zero':
        // Only given with a scaler.
        return this.options.scaler ? this.atZero(found.fn, this.options.scaler) : { state: 'unknown' };
      case 'ready': {
        const { endpoints, canary, ...route } = found.route;
        const counted = this.counted(found.fn);
        const pick = canary ? this.canaries.choose(objectKey(namespace, name), canary) : undefined;
        if (pick && canary)
          return {
            ...route,
            revision: canary.revision,
            endpoints: pick.endpoints,
            observe: pick.observe,
            ...(counted ? { release: counted } : {}),
          };
        return {
          ...route,
          ...(endpoints ? { endpoints: this.pickers.of(objectKey(namespace, name), endpoints) } : {}),
          ...(counted ? { release: counted } : {}),
        };
      }
    }
  }

  /** Whether the caches behind every route watch the API server now (not since an outage began). */
  watching(): boolean {
    return this.options.cache.connected();
  }

  /** What this thread counted of canaries' answers since last asked. */
  takeCanaryCounts(): CanaryCounts[] {
    return this.canaries.take();
  }

  /** A branch preview is a Function of its own (see core/previews.ts), routed as any other. */
  private resolvePreview(namespace: string, name: string, label: string): Promise<RouteState> {
    const target = previewFunctionName(name, label);
    if (isPreviewOf(this.options.cache.fn(namespace, target), name, label))
      return this.resolve(namespace, target);
    if (!this.options.cache.fn(namespace, name)) return Promise.resolve({ state: 'unknown' });
    return Promise.resolve({
      state: 'unavailable',
      status: 404,
      message: noPreviewMessage(namespace, name, label),
    });
  }

  /**
   * What the caches say of `/fn/{namespace}/{name}` now, before anything is counted or started: the
   * one computation behind both `resolve` and the routes the gateway thread is told (route-publisher.ts),
   * so the two cannot disagree. Asks nothing of the API server; assumes the caches have listed once.
   */
  cached(namespace: string, name: string): CachedRoute {
    const { cache } = this.options;
    const fn = cache.fn(namespace, name);
    if (!fn) return { kind: 'unknown' };
    // Which revision serves is decided apart from Ready: a Function whose new revision failed is
    // not Ready, yet the revision that served before keeps serving (as a Knative Route keeps its
    // traffic on the last ready revision while the newest one fails).
    // Worded as the local platform words it: the same function answers the same on both.
    if (fn.status?.phase === 'Disabled')
      return { kind: 'answer', route: unavailable(`function ${namespace}/${name} is disabled`) };
    if (!fn.status?.servingRevision)
      return {
        kind: 'answer',
        route: unavailable(
          `function ${namespace}/${name} has no ready revision (${fn.status?.phase ?? 'Pending'})`,
        ),
      };
    if (this.options.scaler && idleSecondsOf(fn) !== undefined) return { kind: 'at-zero', fn };
    const deployment = cache.deployment(namespace, name);
    const available =
      (deployment?.status as { availableReplicas?: number } | undefined)?.availableReplicas ?? 0;
    const endpoints = this.endpointsOf(namespace, name, fn.status.servingRevision);
    // The Deployment's count lags the pods both ways: ready endpoints of the serving revision serve
    // even while it still says none is available (after an API server outage it caught up about 16 s
    // after the endpoints did, with requests held all that time).
    if (available === 0 && !endpoints)
      return {
        kind: 'no-replica',
        route: unavailable(`function ${namespace}/${name} has no available replicas`),
      };
    const origin = this.options.originOf
      ? this.options.originOf(namespace, name)
      : this.options.route === 'cluster-ip'
        ? this.clusterIpOrigin(namespace, name)
        : serviceOrigin(namespace, name);
    if (!origin)
      return {
        kind: 'answer',
        route: unavailable(`function ${namespace}/${name} has no Service address yet`),
      };
    // The other way: once the slices say no pod serves (and none was revoked by the control plane
    // alone, which `endpoints` would have named), the Service address would refuse the connection,
    // so the request waits for a replica as when none is available.
    if (!endpoints && this.usesEndpoints() && cache.servesNowhere(namespace, name))
      return {
        kind: 'no-replica',
        route: unavailable(`function ${namespace}/${name} has no ready endpoints`),
      };
    const canary = canaryRouteOf(cache.deployment(namespace, canaryName(name)), name, (revision) =>
      this.endpointsOf(namespace, name, revision),
    );
    return {
      kind: 'ready',
      fn,
      route: {
        state: 'ready',
        origin,
        ...(endpoints ? { endpoints } : {}),
        timeoutSec: timeoutSecOf(fn),
        ...revisionOf(fn),
        // Over the available replicas, whichever way they are reached; each proxy limits alone.
        ...admissionOf(fn.spec.scale, Math.max(available, endpoints?.length ?? 0)),
        ...(canary ? { canary } : {}),
      },
    };
  }

  /**
   * A function that scales to zero is reached at one ready endpoint, started first when it has none
   * (the request is held meanwhile); its requests are counted for the idle scale-down.
   */
  private async atZero(fn: SlessFunction, scaler: KubeScaler): Promise<RouteState> {
    const { cache } = this.options;
    const { namespace, name } = fn.metadata;
    let endpoint = await scaler.readyEndpoint(namespace, name);
    if (!endpoint) {
      if (!cache.connected())
        return unavailable(
          `function ${namespace}/${name} is scaled to zero and cannot be started while the control plane is unreachable; try again`,
        );
      try {
        endpoint = await scaler.activate(fn);
      } catch (error) {
        const message = asError(error).message;
        return unavailable(
          error instanceof ActivationError
            ? message
            : `function ${namespace}/${name} is scaled to zero and cannot be started: the control plane is unreachable (${message}); try again`,
        );
      }
    }
    // Tests that map endpoint addresses reach the endpoint; those that give only originOf, that.
    const { originOf, endpointOrigin } = this.options;
    const origin = originOf && !endpointOrigin ? originOf(namespace, name) : endpoint;
    const idle = scaler.requestStarted(fn);
    const counted = this.counted(fn);
    return {
      state: 'ready',
      origin,
      timeoutSec: timeoutSecOf(fn),
      ...revisionOf(fn),
      // Requests here go to one ready endpoint, so one instance's worth.
      ...admissionOf(fn.spec.scale, 1),
      release: counted
        ? () => {
            idle();
            counted();
          }
        : idle,
    };
  }

  /** Requests of `namespace/name` held now for an available replica. */
  heldForReplica(namespace: string, name: string): number {
    return this.options.replicaWait?.held(namespace, name) ?? 0;
  }

  /**
   * Waits for an available replica of an always-on function, then resolves the request as it would
   * have been; or answers that there is none, saying for how long it was held.
   */
  private async waitForReplica(namespace: string, name: string, none: UnavailableRoute): Promise<RouteState> {
    const wait = this.options.replicaWait;
    if (!wait) return none;
    const end = await wait.wait(namespace, name, () => this.cached(namespace, name).kind !== 'no-replica');
    switch (end) {
      case 'changed':
        return this.resolve(namespace, name);
      case 'timeout':
        return { ...none, message: `${none.message} (held ${wait.timeoutSec} s for one)` };
      case 'full':
        return { ...none, message: `${none.message}, and too many requests are held for one already` };
      case 'disconnected':
        return none;
    }
  }

  /** Starts counting the request for the autoscaler, when the function autoscales. */
  private counted(fn: SlessFunction): (() => void) | undefined {
    return fn.spec.scale && this.options.autoscaler ? this.options.autoscaler.requestStarted(fn) : undefined;
  }

  /**
   * The origins of the ready endpoints whose pods run `revision`, or undefined while none is known (a
   * pod just started, whose endpoint or pod is not seen yet): then the Service address serves, as before.
   */
  private endpointsOf(namespace: string, name: string, revision: string): readonly string[] | undefined {
    if (!this.usesEndpoints()) return undefined;
    const { endpointOrigin } = this.options;
    const addresses = this.options.cache.servingAddresses(namespace, name, revision);
    if (addresses.length === 0) return undefined;
    let origins = this.originsByAddresses.get(addresses);
    if (!origins) {
      origins = Object.freeze(addresses.map((address) => (endpointOrigin ?? addressOrigin)(address)));
      this.originsByAddresses.set(addresses, origins);
    }
    return origins;
  }

  /** Endpoints are read unless a test sends every request to one origin of its own. */
  private usesEndpoints(): boolean {
    return !(this.options.originOf && !this.options.endpointOrigin);
  }

  private clusterIpOrigin(namespace: string, name: string): string | undefined {
    const service = this.options.cache.service(namespace, name);
    const ip = (service?.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (!ip || ip === 'None') return undefined;
    return `http://${ip.includes(':') ? `[${ip}]` : ip}:${FUNCTION_PORT}`;
  }
}

/** The serving revision, so the proxy opens fresh connections when it changes behind one address. */
function revisionOf(fn: SlessFunction): { revision?: string } {
  const revision = fn.status?.servingRevision;
  return revision ? { revision } : {};
}
