/** `/fn/{ns}/{name}` → the function's Service, only while it has a ready revision. */

import type { FunctionRoute } from '../../config/kube.js';
import { getCondition } from '../../core/conditions.js';
import type { ObjectStore, RouteResolver, RouteState } from '../../core/interfaces.js';
import type { SlessFunction } from '../../core/resources.js';
import type { KubeHttp } from './http.js';
import { FUNCTION_PORT } from './labels.js';
import { getObject, type KubeObject } from './objects.js';
import { DEPLOYMENT, SERVICE } from './resource-types.js';
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
}

export function serviceOrigin(namespace: string, name: string): string {
  return `http://${serviceName(name)}.${namespace}.svc:${FUNCTION_PORT}`;
}

export class KubeRouteResolver implements RouteResolver {
  private readonly options: KubeRouteOptions;
  private readonly cache = new Map<string, { at: number; state: RouteState }>();

  constructor(options: KubeRouteOptions) {
    this.options = options;
  }

  async resolve(namespace: string, name: string): Promise<RouteState> {
    const key = `${namespace}/${name}`;
    const ttl = this.options.cacheMs ?? 1000;
    const cached = this.cache.get(key);
    if (cached && Date.now() - cached.at < ttl) return cached.state;
    const state = await this.lookup(namespace, name);
    if (ttl > 0) this.cache.set(key, { at: Date.now(), state });
    if (this.cache.size > 10_000) this.cache.clear();
    return state;
  }

  private async lookup(namespace: string, name: string): Promise<RouteState> {
    const fn = (await this.options.store.get('Function', namespace, name)) as SlessFunction | undefined;
    if (!fn) return { state: 'unknown' };
    const unavailable = (message: string): RouteState => ({ state: 'unavailable', status: 503, message });
    if (getCondition(fn.status?.conditions, 'Ready')?.status !== 'True')
      return unavailable(
        `function ${namespace}/${name} has no ready revision (${fn.status?.phase ?? 'Pending'})`,
      );
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
    const revision = fn.status?.servingRevision;
    return {
      state: 'ready',
      origin,
      timeoutSec: fn.spec.timeoutSec ?? 30,
      ...(revision ? { revision } : {}),
    };
  }

  private async clusterIpOrigin(namespace: string, name: string): Promise<string | undefined> {
    const service = await getObject<KubeObject>(this.options.http, SERVICE, namespace, serviceName(name));
    const ip = (service?.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (!ip || ip === 'None') return undefined;
    return `http://${ip.includes(':') ? `[${ip}]` : ip}:${FUNCTION_PORT}`;
  }
}
