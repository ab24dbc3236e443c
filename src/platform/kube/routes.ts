/**
 * `/fn/{ns}/{name}` → the function's Service, only while a revision serves (`status.servingRevision`,
 * whatever Ready says of the newest revision). A function that scales to zero is reached at a ready endpoint of its Service instead, read from its EndpointSlices:
 * when it runs nothing, the request is held while the scaler starts it (see scaler.ts), and a pod
 * that just became ready is reachable at once, before kube-proxy on any node has learnt of it.
 */

import type { FunctionRoute } from '../../config/kube.js';
import { asError } from '../../core/errors.js';
import type { ObjectStore, RouteResolver, RouteState } from '../../core/interfaces.js';
import type { SlessFunction } from '../../core/resources.js';
import type { KubeHttp } from './http.js';
import { FUNCTION_PORT } from './labels.js';
import { getObject, type KubeObject } from './objects.js';
import { DEPLOYMENT, SERVICE } from './resource-types.js';
import { idleSecondsOf, type KubeScaler } from './scaler.js';
import { serviceName } from './workload-manifests.js';

export interface KubeRouteOptions {
  http: KubeHttp;
  store: ObjectStore;
  /** How the Service is addressed: its DNS name (default) or its ClusterIP (no cluster DNS needed). */
  route?: FunctionRoute;
  /** Where a function's Service answers; injectable so tests can point at a local server. */
  originOf?: (namespace: string, name: string) => string;
  /** How long one resolution is reused, to keep per-request API calls down. 0 disables. */
  cacheMs?: number;
  /** Holds requests for functions at zero and starts them; without it they answer 503. */
  scaler?: KubeScaler;
}

interface Resolved {
  state: RouteState;
  /** Set for a function that scales to zero: its requests are counted as activity. */
  scalesToZero?: SlessFunction;
}

export function serviceOrigin(namespace: string, name: string): string {
  return `http://${serviceName(name)}.${namespace}.svc:${FUNCTION_PORT}`;
}

export class KubeRouteResolver implements RouteResolver {
  private readonly options: KubeRouteOptions;
  private readonly cache = new Map<string, { at: number; resolved: Resolved }>();

  constructor(options: KubeRouteOptions) {
    this.options = options;
  }

  async resolve(namespace: string, name: string): Promise<RouteState> {
    const key = `${namespace}/${name}`;
    const ttl = this.options.cacheMs ?? 1000;
    const cached = this.cache.get(key);
    let resolved: Resolved;
    if (cached && Date.now() - cached.at < ttl) resolved = cached.resolved;
    else {
      resolved = await this.lookup(namespace, name);
      // A refused activation is not kept: the next request may join a new one.
      if (ttl > 0 && !(resolved.scalesToZero && resolved.state.state !== 'ready'))
        this.cache.set(key, { at: Date.now(), resolved });
      if (this.cache.size > 10_000) this.cache.clear();
    }
    const { state, scalesToZero } = resolved;
    if (state.state !== 'ready' || !scalesToZero || !this.options.scaler) return state;
    return { ...state, release: this.options.scaler.requestStarted(scalesToZero) };
  }

  private async lookup(namespace: string, name: string): Promise<Resolved> {
    const fn = await this.options.store.get('Function', namespace, name);
    if (!fn) return { state: { state: 'unknown' } };
    const unavailable = (message: string): Resolved => ({
      state: { state: 'unavailable', status: 503, message },
    });
    // Which revision serves is decided apart from Ready: a Function whose new revision failed is
    // not Ready, yet the revision that served before keeps serving (as a Knative Route keeps its
    // traffic on the last ready revision while the newest one fails).
    if (!fn.status?.servingRevision || fn.status.phase === 'Disabled')
      return unavailable(
        `function ${namespace}/${name} has no ready revision (${fn.status?.phase ?? 'Pending'})`,
      );
    const timeoutSec = fn.spec.timeoutSec ?? 30;
    const scaler = this.options.scaler;
    if (scaler && idleSecondsOf(fn) !== undefined) {
      let endpoint: string;
      try {
        endpoint = (await scaler.readyEndpoint(namespace, name)) ?? (await scaler.activate(fn));
      } catch (error) {
        return { ...unavailable(asError(error).message), scalesToZero: fn };
      }
      const origin = this.options.originOf ? this.options.originOf(namespace, name) : endpoint;
      return { state: { state: 'ready', origin, timeoutSec, ...revisionOf(fn) }, scalesToZero: fn };
    }
    const deployment = await getObject<KubeObject>(this.options.http, DEPLOYMENT, namespace, name);
    const available =
      (deployment?.status as { availableReplicas?: number } | undefined)?.availableReplicas ?? 0;
    if (available === 0) return unavailable(`function ${namespace}/${name} has no available replicas`);
    const origin = this.options.originOf
      ? this.options.originOf(namespace, name)
      : this.options.route === 'cluster-ip'
        ? await this.clusterIpOrigin(namespace, name)
        : serviceOrigin(namespace, name);
    if (!origin) return unavailable(`function ${namespace}/${name} has no Service address yet`);
    return { state: { state: 'ready', origin, timeoutSec, ...revisionOf(fn) } };
  }

  private async clusterIpOrigin(namespace: string, name: string): Promise<string | undefined> {
    const service = await getObject<KubeObject>(this.options.http, SERVICE, namespace, serviceName(name));
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
