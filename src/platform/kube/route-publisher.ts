/**
 * Keeps the gateway thread told of each kube function's route, from the route cache alone: whenever a
 * Function, its Deployment, its Service, its EndpointSlices or its pods change, the route
 * `KubeRouteResolver` would give a request now (the serving revision's ready endpoints, which the
 * thread balances over, included) is
 * published to the mirror. Only an always-on function with an available replica gets a ready
 * route there; everything else (a function that scales to zero, which the scaler must see request by
 * request; disabled; no revision or replica yet; deleted; unknown) is published as undefined, so the
 * thread hands its requests to the main thread, which resolves them as before.
 */
import type { MirroredRoute, RouteMirror } from '../../core/interfaces.js';
import { objectKey, splitObjectKey } from '../../core/object-key.js';
import type { SlessFunction } from '../../core/resources.js';
import type { KubeRouteCache } from './route-cache.js';
import type { KubeRouteResolver } from './routes.js';

export interface KubeRoutePublisherOptions {
  cache: KubeRouteCache;
  /** The one route computation: what `resolve` answers from, too. */
  routes: Pick<KubeRouteResolver, 'cached'>;
  mirror: RouteMirror;
  /** Where the autoscaler reads an autoscaled function's requests; the thread counts there. */
  autoscaler: { slotOf(fn: SlessFunction): number | undefined };
  /** Every function key the store's watch holds, for the first publication once the caches listed. */
  functionKeys: () => Iterable<string>;
}

export class KubeRoutePublisher {
  private readonly options: KubeRoutePublisherOptions;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(options: KubeRoutePublisherOptions) {
    this.options = options;
  }

  /** Publishes on every change from now on, and everything once the caches have listed. */
  start(): void {
    this.unsubscribe = this.options.cache.onChange((namespace, name) =>
      this.publish(objectKey(namespace, name)),
    );
    void (async () => {
      // Before the first lists a request waits for them on the main thread; nothing is published.
      while (!this.stopped && !(await this.options.cache.whenSynced(1000)))
        await new Promise((r) => setTimeout(r, 100));
      if (this.stopped) return;
      for (const key of this.options.functionKeys()) this.publish(key);
    })();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
  }

  /** The route the thread is to serve for `key` now; undefined: the main thread's to answer. */
  routeOf(key: string): MirroredRoute | undefined {
    if (!this.options.cache.synced()) return undefined;
    const { namespace, name } = splitObjectKey(key);
    const found = this.options.routes.cached(namespace, name);
    if (found.kind !== 'ready') return undefined;
    const slot = found.fn.spec.scale ? this.options.autoscaler.slotOf(found.fn) : undefined;
    // A function that autoscales, with no slot to count in (a full board), stays on the main thread.
    if (found.fn.spec.scale && slot === undefined) return undefined;
    return { ...found.route, ...(slot !== undefined ? { activitySlot: slot } : {}) };
  }

  private publish(key: string): void {
    if (this.stopped) return;
    this.options.mirror.publish(key, this.routeOf(key));
  }
}
