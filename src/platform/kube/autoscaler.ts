/**
 * Concurrency-based autoscaling on kube: this replica's `/fn/` proxy counts in-flight requests per
 * function with `spec.scale` (a time-weighted meter, sampled every tick); while this replica leads,
 * each tick runs core/autoscale.ts's decision over the samples of the stable window and sets the
 * Deployment's replicas through its scale subresource, with the scaler's field manager, as a
 * compare-and-swap on the resourceVersion the informer last saw (a stale one is a 409, and the next
 * tick decides again). Deployments are read from the route cache, never listed per tick.
 *
 * Zero belongs to the idle scale-down and the activator (scaler.ts): a Deployment at 0 is left alone
 * here, and the decision is never applied below 1.
 */

import type { Logger } from 'pino';
import {
  ConcurrencyMeter,
  type ConcurrencySample,
  decideScale,
  INITIAL_SCALE_STATE,
  type ScaleState,
  scaleSettingsOf,
} from '../../core/autoscale.js';
import { asError } from '../../core/errors.js';
import type { EventRecorder } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { SlessFunction } from '../../core/resources.js';
import { isStatus, type KubeHttp, MERGE_PATCH } from './http.js';
import { DEPLOYMENT, objectPath } from './resource-types.js';
import type { KubeRouteCache } from './route-cache.js';
import { SCALER_MANAGER } from './scaler.js';

export interface KubeAutoscalerOptions {
  http: KubeHttp;
  cache: KubeRouteCache;
  /** The Functions with `spec.scale`, as the store's watch holds them (undefined before its first list). */
  functions: () => SlessFunction[] | undefined;
  logger: Logger;
  events?: EventRecorder;
  /** Whether this replica applies decisions; every replica counts. */
  isLeader?: () => boolean;
  /** How often in-flight requests are sampled and a decision is made (default 1 s). */
  tickMs?: number;
  /** Called with every decision applied, for metrics. */
  onScaled?: (fn: SlessFunction, from: number, to: number) => void;
}

interface Tracked {
  meter: ConcurrencyMeter;
  samples: ConcurrencySample[];
  state: ScaleState;
}

export class KubeAutoscaler {
  private readonly options: KubeAutoscalerOptions;
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(options: KubeAutoscalerOptions) {
    this.options = options;
  }

  start(): void {
    const every = this.options.tickMs ?? 1000;
    const next = () => {
      this.timer = setTimeout(async () => {
        await this.tick();
        if (this.timer) next();
      }, every);
    };
    next();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A request for an autoscaled function starts; the returned function marks its end. */
  requestStarted(fn: SlessFunction): () => void {
    const tracked = this.trackedOf(objectKey(fn.metadata.namespace, fn.metadata.name));
    tracked.meter.started(Date.now());
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      tracked.meter.ended(Date.now());
    };
  }

  /** In-flight requests of the function on this replica now. */
  inflightOf(namespace: string, name: string): number {
    return this.tracked.get(objectKey(namespace, name))?.meter.current ?? 0;
  }

  private trackedOf(key: string): Tracked {
    let tracked = this.tracked.get(key);
    if (!tracked) {
      tracked = { meter: new ConcurrencyMeter(Date.now()), samples: [], state: INITIAL_SCALE_STATE };
      this.tracked.set(key, tracked);
    }
    return tracked;
  }

  /** One sample of every meter, and (while leading) one decision per autoscaled function. */
  async tick(now = Date.now()): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const functions = this.options.functions() ?? [];
      const wanted = new Set(functions.map((fn) => objectKey(fn.metadata.namespace, fn.metadata.name)));
      for (const key of this.tracked.keys()) if (!wanted.has(key)) this.tracked.delete(key);
      for (const fn of functions) {
        const settings = scaleSettingsOf(fn);
        if (!settings) continue;
        const tracked = this.trackedOf(objectKey(fn.metadata.namespace, fn.metadata.name));
        tracked.samples.push({ at: now, concurrency: tracked.meter.sample(now) });
        const oldest = now - settings.stableWindowMs;
        while ((tracked.samples[0]?.at ?? now) <= oldest) tracked.samples.shift();
        if (this.options.isLeader?.() ?? true) await this.decide(fn, tracked, now);
      }
    } catch (error) {
      this.options.logger.warn({ err: asError(error).message }, 'autoscaling pass failed');
    } finally {
      this.ticking = false;
    }
  }

  private async decide(fn: SlessFunction, tracked: Tracked, now: number): Promise<void> {
    const settings = scaleSettingsOf(fn);
    const { namespace, name } = fn.metadata;
    const deployment = this.options.cache.deployment(namespace, name);
    if (!settings || !deployment || deployment.metadata.deletionTimestamp) return;
    const replicas = (deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1;
    if (replicas === 0) return;
    const ready = (deployment.status as { readyReplicas?: number } | undefined)?.readyReplicas ?? 0;
    const decision = decideScale(settings, tracked.samples, now, ready, tracked.state);
    tracked.state = decision.state;
    const desired = Math.max(decision.desired, 1);
    if (desired === replicas) return;
    try {
      await this.options.http.request('PATCH', objectPath(DEPLOYMENT, namespace, name, 'scale'), {
        query: { fieldManager: SCALER_MANAGER },
        contentType: MERGE_PATCH,
        body: {
          metadata: { resourceVersion: deployment.metadata.resourceVersion },
          spec: { replicas: desired },
        },
      });
    } catch (error) {
      // Changed since the informer saw it (a rollout, the activator): the next tick decides again.
      if (isStatus(error, 409) || isStatus(error, 404)) return;
      throw error;
    }
    const why = `${decision.stableConcurrency.toFixed(1)} in flight over the stable window, ${decision.panicConcurrency.toFixed(1)} over the panic window, target ${settings.target}`;
    this.options.logger.info(
      { function: objectKey(namespace, name), from: replicas, to: desired, panicking: decision.panicking },
      'autoscaled',
    );
    this.options.events?.record(
      fn,
      'Normal',
      desired > replicas ? 'ScaledOut' : 'ScaledIn',
      `scaled from ${replicas} to ${desired} instances${decision.panicking ? ' (panic)' : ''}: ${why}`,
    );
    this.options.onScaled?.(fn, replicas, desired);
  }
}
