/**
 * What `/fn/` routing and the scaler read of the cluster, held in memory by informers: the function
 * Deployments (available and desired replicas, the last request noted), their Services (ClusterIP),
 * their EndpointSlices (ready pod addresses) and their pods (which revision each runs: a slice lists
 * every ready pod of the Service, a rolling-out revision's too; and whose readiness the control plane
 * revoked while the kubelet still reports its containers ready). Functions come from the store's own
 * watch. Nothing here asks the API server per request; with the API server gone, the last known state
 * stays.
 */
import type { Logger } from 'pino';
import type { StoreEvent } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { SlessFunction } from '../../core/resources.js';
import { anyServingAddress, notReadyAddressesOf, readyAddressesOf } from './endpoints.js';
import type { KubeHttp } from './http.js';
import { Informer } from './informer.js';
import {
  ANNOTATION_REVISION,
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from './labels.js';
import type { KubeObject } from './objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE, POD, SERVICE } from './resource-types.js';
import { StartingPods, type StartingPodsOptions } from './starting-pods.js';
import { serviceName } from './workload-manifests.js';

/** The store's side: Functions as its watch last saw them. */
export interface FunctionCache {
  peek(kind: 'Function', namespace: string, name: string): SlessFunction | undefined;
  listed(kind: 'Function'): boolean;
  watch(): void;
  /** Every change the store's watch sees, after its cache holds it. */
  subscribe(listener: (event: StoreEvent) => void): () => void;
}

/**
 * A function whose route may have changed: its Function, Deployment, Service or endpoints changed,
 * or a pod of it was first seen or gone.
 */
export type RouteChangeListener = (namespace: string, name: string) => void;

export interface RouteCacheOptions {
  http: KubeHttp;
  logger: Logger;
  functions: FunctionCache;
  /** Namespaces whose functions are served; all when absent. */
  namespaces?: readonly string[];
  /** Whether Services are watched too (only the ClusterIP route reads them). */
  services?: boolean;
  retryMs?: number;
  /** How a started pod is asked whether it answers yet (see starting-pods.ts). */
  startingPods?: StartingPodsOptions;
}

const FUNCTION_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=function`;
const NO_ADDRESSES: readonly string[] = Object.freeze([]);

export class KubeRouteCache {
  readonly functions: FunctionCache;
  private readonly deployments: Informer;
  private readonly services: Informer | undefined;
  private readonly slices: Informer;
  /** EndpointSlices by `namespace/service`, kept beside the informer's own map. */
  private readonly slicesByService = new Map<string, Map<string, KubeObject>>();
  /**
   * Ready addresses by `namespace/service`, read once per change of its slices: every `/fn/`
   * request reads them, and the same array (by identity) says nothing changed.
   */
  private readonly readyByService = new Map<string, readonly string[]>();
  private readonly pods: Informer;
  /** The revision each function pod runs (its template's annotation), by `namespace/pod`. */
  private readonly podRevisions = new Map<string, string>();
  /**
   * Function pods, by `namespace/pod`, running and not deleted, whose Ready condition is False while
   * their ContainersReady is True. The kubelet sets both from its probes; only the node lifecycle
   * controller turns Ready alone to False, when a node's kubelet has not renewed its lease in time
   * (as after an API-server restart, for up to a minute, with every container still answering).
   */
  private readonly readinessRevoked = new Set<string>();
  /** The pods that answer, by function and revision, before the kubelet's probe said so too. */
  private readonly starting: StartingPods;
  /**
   * The ready addresses of the serving revision's pods, by `namespace/service`, read once per change
   * of the slices, of the pods known or of the revision asked for; the same array says nothing changed.
   */
  private readonly servingByService = new Map<string, Map<string, readonly string[]>>();
  private readonly changeListeners = new Set<RouteChangeListener>();
  private unsubscribeFunctions: (() => void) | undefined;

  constructor(options: RouteCacheOptions) {
    this.functions = options.functions;
    this.starting = new StartingPods(options.startingPods);
    this.starting.onChange((namespace, fn) => {
      this.servingByService.delete(objectKey(namespace, serviceName(fn)));
      this.changed(namespace, fn);
    });
    const common = {
      http: options.http,
      logger: options.logger,
      ...(options.namespaces ? { namespaces: options.namespaces } : {}),
      ...(options.retryMs !== undefined ? { retryMs: options.retryMs } : {}),
    };
    // The idle sweep reads who owns `spec.replicas` from managedFields.
    this.deployments = new Informer({
      ...common,
      type: DEPLOYMENT,
      selector: FUNCTION_SELECTOR,
      keepManagedFields: true,
      // A function's Deployment has its name; its canary's names it in the function label.
      onChange: (deployment) =>
        this.changed(
          deployment.metadata.namespace,
          deployment.metadata.labels?.[LABEL_FUNCTION] ?? deployment.metadata.name,
        ),
    });
    this.services = options.services
      ? new Informer({
          ...common,
          type: SERVICE,
          selector: FUNCTION_SELECTOR,
          onChange: (service) =>
            this.changed(service.metadata.namespace, service.metadata.labels?.[LABEL_FUNCTION]),
        })
      : undefined;
    // The EndpointSlice controller copies a Service's labels onto its slices.
    this.slices = new Informer({
      ...common,
      type: ENDPOINT_SLICE,
      selector: LABEL_FUNCTION,
      onChange: (slice, removed) => this.indexSlice(slice, removed),
    });
    // Which revision a pod runs (never changed for a pod) and whether its readiness was revoked.
    this.pods = new Informer({
      ...common,
      type: POD,
      selector: FUNCTION_SELECTOR,
      onChange: (pod, removed) => this.indexPod(pod, removed),
    });
  }

  start(): void {
    this.functions.watch();
    this.deployments.start();
    this.services?.start();
    this.slices.start();
    this.pods.start();
  }

  stop(): void {
    this.unsubscribeFunctions?.();
    this.unsubscribeFunctions = undefined;
    this.changeListeners.clear();
    this.deployments.stop();
    this.services?.stop();
    this.slices.stop();
    this.pods.stop();
    this.starting.stop();
  }

  /**
   * Called with each function whose Function, Deployment, Service or EndpointSlices changed (added,
   * changed, removed, a re-list included), once the cache holds the change: an always-on function's
   * route carries its ready endpoints.
   */
  onChange(listener: RouteChangeListener): () => void {
    this.changeListeners.add(listener);
    this.unsubscribeFunctions ??= this.functions.subscribe((event) => {
      if (event.object.kind === 'Function')
        this.changed(event.object.metadata.namespace, event.object.metadata.name);
    });
    return () => this.changeListeners.delete(listener);
  }

  /**
   * Everything has been listed once. Pods are not waited for: until they are, no endpoint is known
   * to run the serving revision, and requests go to the Service address.
   */
  synced(): boolean {
    return (
      this.functions.listed('Function') &&
      this.deployments.synced() &&
      (this.services?.synced() ?? true) &&
      this.slices.synced()
    );
  }

  /** Waits (at most `timeoutMs`) for the first lists; true once synced. */
  async whenSynced(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    await Promise.all([
      this.deployments.whenSynced(timeoutMs),
      this.services?.whenSynced(timeoutMs),
      this.slices.whenSynced(timeoutMs),
    ]);
    while (!this.functions.listed('Function') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    return this.synced();
  }

  /** Whether the watches are up now; false while the API server is unreachable. */
  connected(): boolean {
    return this.deployments.connected() && this.slices.connected() && (this.services?.connected() ?? true);
  }

  fn(namespace: string, name: string): SlessFunction | undefined {
    return this.functions.peek('Function', namespace, name);
  }

  deployment(namespace: string, name: string): KubeObject | undefined {
    return this.deployments.get(namespace, name);
  }

  /** Every function Deployment as last seen (the cached objects: not to be changed). */
  allDeployments(): IterableIterator<KubeObject> {
    return this.deployments.values();
  }

  service(namespace: string, name: string): KubeObject | undefined {
    return this.services?.get(namespace, serviceName(name));
  }

  /**
   * The ready endpoint addresses of the function's Service, sorted (see endpoints.ts): the same
   * array until its EndpointSlices change. Not to be changed.
   */
  readyAddresses(namespace: string, name: string): readonly string[] {
    const key = `${namespace}/${serviceName(name)}`;
    let ready = this.readyByService.get(key);
    if (!ready) {
      const slices = this.slicesByService.get(key);
      if (!slices) return NO_ADDRESSES;
      ready = Object.freeze(readyAddressesOf(slices.values()));
      this.readyByService.set(key, ready);
    }
    return ready;
  }

  /**
   * Whether the function's Service has EndpointSlices listed and not one endpoint in them serves.
   * Then its address refuses connections (kube-proxy follows the same slices), so a request sent
   * there fails; with no slice listed at all nothing is known, and the address may still serve.
   */
  servesNowhere(namespace: string, name: string): boolean {
    const slices = this.slicesByService.get(`${namespace}/${serviceName(name)}`);
    return slices !== undefined && !anyServingAddress(slices.values());
  }

  /**
   * The addresses of the function's pods that run `revision` and take requests, sorted: the ready
   * endpoints of its Service whose pod is known to run it (one not seen yet, or not named, is left
   * out), and the pods that answer already while the kubelet and the slices have yet to say so (see
   * starting-pods.ts). When none does, the not-ready endpoints whose pod's readiness the control plane
   * revoked (see `readinessRevoked`): their containers still pass the kubelet's probes, and without
   * them the function would serve nowhere until the kubelet reports again. The same array until its
   * slices, its pods or `revision` change. Not to be changed.
   */
  servingAddresses(namespace: string, name: string, revision: string): readonly string[] {
    const key = `${namespace}/${serviceName(name)}`;
    // By revision: during a canary, two revisions are asked for in turn.
    let known = this.servingByService.get(key);
    const cached = known?.get(revision);
    if (cached) return cached;
    const slices = this.slicesByService.get(key);
    const runs = (pod: string) => this.podRevisions.get(objectKey(namespace, pod)) === revision;
    const revoked = (pod: string) => runs(pod) && this.readinessRevoked.has(objectKey(namespace, pod));
    const ready = readyAddressesOf(slices?.values() ?? [], runs);
    let found = [...new Set([...ready, ...this.starting.answering(namespace, name, revision)])].sort();
    if (found.length === 0) found = notReadyAddressesOf(slices?.values() ?? [], revoked);
    const addresses = found.length === 0 ? NO_ADDRESSES : Object.freeze(found);
    if (!known || known.size >= 4) {
      known = new Map();
      this.servingByService.set(key, known);
    }
    known.set(revision, addresses);
    return addresses;
  }

  /** Told whenever the pods of a function that answer change (see starting-pods.ts). */
  onPodsAnswering(listener: (namespace: string, fn: string) => void): () => void {
    return this.starting.onChange(listener);
  }

  /** How many pods of `fn` running `revision` answer now (see starting-pods.ts). */
  answeringPods(namespace: string, fn: string, revision: string): number {
    return this.starting.answering(namespace, fn, revision).length;
  }

  private changed(namespace: string | undefined, name: string | undefined): void {
    if (namespace === undefined || name === undefined) return;
    for (const listener of this.changeListeners) listener(namespace, name);
  }

  private indexSlice(slice: KubeObject, removed: boolean): void {
    const service = slice.metadata.labels?.['kubernetes.io/service-name'];
    if (!service) return;
    const key = `${slice.metadata.namespace}/${service}`;
    this.readyByService.delete(key);
    this.servingByService.delete(key);
    let slices = this.slicesByService.get(key);
    if (removed) {
      slices?.delete(slice.metadata.name);
      if (slices?.size === 0) this.slicesByService.delete(key);
    } else {
      if (!slices) {
        slices = new Map();
        this.slicesByService.set(key, slices);
      }
      slices.set(slice.metadata.name, slice);
    }
    // The EndpointSlice controller copies the Service's labels, the function's name among them.
    this.changed(slice.metadata.namespace, slice.metadata.labels?.[LABEL_FUNCTION]);
  }

  private indexPod(pod: KubeObject, removed: boolean): void {
    this.starting.observe(pod, removed);
    const namespace = pod.metadata.namespace;
    const fn = pod.metadata.labels?.[LABEL_FUNCTION];
    if (namespace === undefined || fn === undefined) return;
    const key = objectKey(namespace, pod.metadata.name);
    const revision = removed ? undefined : pod.metadata.annotations?.[ANNOTATION_REVISION];
    const revoked = !removed && readinessRevokedOf(pod);
    if (this.podRevisions.get(key) === revision && this.readinessRevoked.has(key) === revoked) return;
    if (revision === undefined) this.podRevisions.delete(key);
    else this.podRevisions.set(key, revision);
    if (revoked) this.readinessRevoked.add(key);
    else this.readinessRevoked.delete(key);
    const service = objectKey(namespace, serviceName(fn));
    this.servingByService.delete(service);
    this.changed(namespace, fn);
  }
}

/** Running, not deleted, Ready False and ContainersReady True: see `readinessRevoked`. */
function readinessRevokedOf(pod: KubeObject): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const status = pod.status as
    | { phase?: string; conditions?: { type?: string; status?: string }[] }
    | undefined;
  if (status?.phase !== 'Running') return false;
  const condition = (type: string) => status.conditions?.find((c) => c.type === type)?.status;
  return condition('Ready') === 'False' && condition('ContainersReady') === 'True';
}
