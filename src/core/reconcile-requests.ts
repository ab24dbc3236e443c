/**
 * Requests to reconcile one object that come from watchers other than the store: a function's
 * process that exited or was scaled, a cron schedule that fired, a queue consumer that connected,
 * a Deployment edited behind the controller's back, a GitSource whose deletion waits on its
 * finalizer. Watchers publish here and know no controller;
 * whichever controller runs subscribes while it runs and unsubscribes when it stops. So the wiring
 * needs no holder filled in later, and on kube a new leader term picks the stream up by itself.
 *
 * A request nobody listens to is dropped: a controller that starts lists every object anyway.
 */
import type { KindName } from './schemas.js';

/**
 * The kinds a watcher can ask about: the ones whose reconcile puts a workload back, and GitSource,
 * whose reconcile runs its finalizer (the prune) when it finds the source deleting.
 */
export type RequestedKind = Extract<KindName, 'Function' | 'Trigger' | 'FunctionJob' | 'GitSource'>;

export interface ReconcileRequest {
  kind: RequestedKind;
  namespace: string;
  name: string;
}

export type ReconcileRequestListener = (request: ReconcileRequest) => void;

export class ReconcileRequests {
  private readonly listeners = new Set<ReconcileRequestListener>();

  /** Asks every listening controller to reconcile `kind` `namespace/name` soon. */
  request(kind: RequestedKind, namespace: string, name: string): void {
    for (const listener of [...this.listeners]) listener({ kind, namespace, name });
  }

  /** A function for `request` of one kind, for watchers that only ever ask about one. */
  requester(kind: RequestedKind): (namespace: string, name: string) => void {
    return (namespace, name) => this.request(kind, namespace, name);
  }

  /** Listens until the returned function is called. */
  subscribe(listener: ReconcileRequestListener): () => void {
    // A fresh wrapper, so one listener subscribed twice is two subscriptions that end separately.
    const entry: ReconcileRequestListener = (request) => listener(request);
    this.listeners.add(entry);
    return () => this.listeners.delete(entry);
  }

  /** How many listen (for tests: a stopped controller leaves none behind). */
  get listenerCount(): number {
    return this.listeners.size;
  }
}
