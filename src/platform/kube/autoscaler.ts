/**
 * Concurrency-based autoscaling on kube: this replica's `/fn/` proxies (the gateway thread's and the
 * main thread's) count in-flight requests per function with `spec.scale` in the function's slot of a
 * shared ActivityBoard; every tick takes the time-weighted in-flight average since the last one from
 * the slot's request-milliseconds, so a burst between two ticks counts for as long as it lasted.
 * Other replicas serve /fn/ too: a follower hands each tick's samples to `onSampled` (which reports
 * them to the leader), and while this replica leads, each sample adds what the other replicas'
 * fresh reports count (`peers`) to its own, so load that arrives at a follower scales as well. A
 * replica that has just become the leader counted only its own requests while it followed, so for
 * its first stable window it scales out but never in (a failover must not halve a loaded function).
 * While this replica leads, each tick runs core/autoscale.ts's decision over the samples of the
 * stable window and sets the Deployment's replicas through its scale subresource, with the scaler's
 * field manager, as a compare-and-swap on the resourceVersion the informer last saw (a stale one is a
 * 409, and the next tick decides again). Deployments are read from the route cache, never listed per tick.
 *
 * Zero belongs to the idle scale-down and the activator (scaler.ts): a Deployment at 0 is left alone
 * here, and the decision is never applied below 1.
 */

import type { Logger } from 'pino';
import { ActivityBoard } from '../../core/activity-board.js';
import {
  type ConcurrencySample,
  decideScale,
  INITIAL_SCALE_STATE,
  type ScaleState,
  scaleSettingsOf,
} from '../../core/autoscale.js';
import { asError } from '../../core/errors.js';
import type { EventRecorder, RouteMirror } from '../../core/interfaces.js';
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
  /**
   * Where requests are counted: the gateway thread's board when `/fn/` is served there (it counts in
   * the slot of the route it was told), else a board of this thread's own.
   */
  activity?: ActivityBoard;
  /** The gateway thread's routes: a slot is reused only once no route it was told names it. */
  mirror?: Pick<RouteMirror, 'synced'>;
  /** The other replicas' fresh reports, summed per function key; added to this replica's own while it leads. */
  peers?: { totals(now: number, functions: Iterable<string>): Map<string, number> };
  /** Every tick's samples of this replica's own requests, by function key (a follower reports them). */
  onSampled?: (own: ReadonlyMap<string, number>, now: number) => void;
}

interface Tracked {
  /** The function's slot on the board; undefined when the board is full (its requests go uncounted). */
  slot: number | undefined;
  /** The slot's request-milliseconds at the last sample, and when that was. */
  busyMs: number;
  sampledAt: number;
  samples: ConcurrencySample[];
  state: ScaleState;
}

/** The longest a retired slot waits for its last requests before it may be reused (above any timeout). */
const RETIRE_WAIT_MS = 30 * 60_000;

export class KubeAutoscaler {
  private readonly options: KubeAutoscalerOptions;
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private readonly board: ActivityBoard;
  /** When this replica's current term as leader began (its first tick as leader). */
  private leadingSince: number | undefined;

  constructor(options: KubeAutoscalerOptions) {
    this.options = options;
    this.board = options.activity ?? new ActivityBoard();
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

  /** A request for an autoscaled function starts (counted on this thread); the returned function marks its end. */
  requestStarted(fn: SlessFunction): () => void {
    const { slot } = this.trackedOf(objectKey(fn.metadata.namespace, fn.metadata.name));
    if (slot === undefined) return () => undefined;
    this.board.begin(slot);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.board.end(slot);
    };
  }

  /** Where the gateway thread counts the autoscaled function's requests: the slot this autoscaler reads. */
  slotOf(fn: SlessFunction): number | undefined {
    return this.trackedOf(objectKey(fn.metadata.namespace, fn.metadata.name)).slot;
  }

  /** In-flight requests of the function on this replica now, on either thread. */
  inflightOf(namespace: string, name: string): number {
    const slot = this.tracked.get(objectKey(namespace, name))?.slot;
    return slot === undefined ? 0 : this.board.inflightOf(slot);
  }

  private trackedOf(key: string): Tracked {
    let tracked = this.tracked.get(key);
    if (!tracked) {
      const slot = this.board.allocate();
      if (slot === undefined)
        this.options.logger.warn({ function: key }, 'activity board full: requests go uncounted');
      const now = Date.now();
      tracked = {
        slot,
        busyMs: slot === undefined ? 0 : this.board.busyMsOf(slot, now),
        sampledAt: now,
        samples: [],
        state: INITIAL_SCALE_STATE,
      };
      this.tracked.set(key, tracked);
    }
    return tracked;
  }

  /** The time-weighted in-flight average since the last sample (the count now, for a period of no length). */
  private sample(tracked: Tracked, now: number): number {
    const { slot } = tracked;
    if (slot === undefined) return 0;
    const busyMs = this.board.busyMsOf(slot, now);
    const length = now - tracked.sampledAt;
    const average = length > 0 ? (busyMs - tracked.busyMs) / length : this.board.inflightOf(slot);
    tracked.busyMs = busyMs;
    tracked.sampledAt = now;
    return Math.max(average, 0);
  }

  /**
   * The function no longer autoscales (or is gone): its slot is freed once the gateway thread has
   * been told every route change so far (none names the slot then) and its last requests ended.
   */
  private retire(key: string): void {
    const slot = this.tracked.get(key)?.slot;
    this.tracked.delete(key);
    if (slot === undefined) return;
    void (async () => {
      await this.options.mirror?.synced();
      // A request still in flight after that long: the slot stays taken rather than be shared.
      if (await this.board.waitIdle(slot, RETIRE_WAIT_MS, false)) this.board.free(slot);
    })();
  }

  /** One sample of every meter, and (while leading) one decision per autoscaled function. */
  async tick(now = Date.now()): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      // Not listed yet: nothing to decide, and no slot is retired on an empty answer.
      const functions = this.options.functions();
      if (!functions) return;
      const wanted = new Set(functions.map((fn) => objectKey(fn.metadata.namespace, fn.metadata.name)));
      for (const key of [...this.tracked.keys()]) if (!wanted.has(key)) this.retire(key);
      const leading = this.options.isLeader?.() ?? true;
      this.leadingSince = leading ? (this.leadingSince ?? now) : undefined;
      const autoscaled = functions.filter((fn) => scaleSettingsOf(fn) !== undefined);
      const keys = autoscaled.map((fn) => objectKey(fn.metadata.namespace, fn.metadata.name));
      const others = leading ? this.options.peers?.totals(now, keys) : undefined;
      const own = new Map<string, number>();
      for (const [index, fn] of autoscaled.entries()) {
        const settings = scaleSettingsOf(fn);
        const key = keys[index] as string;
        if (!settings) continue;
        const tracked = this.trackedOf(key);
        const mine = this.sample(tracked, now);
        own.set(key, mine);
        tracked.samples.push({ at: now, concurrency: mine + (others?.get(key) ?? 0) });
        const oldest = now - settings.stableWindowMs;
        while ((tracked.samples[0]?.at ?? now) <= oldest) tracked.samples.shift();
        if (leading) await this.decide(fn, tracked, now);
      }
      this.options.onSampled?.(own, now);
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
    let desired = Math.max(decision.desired, 1);
    // Its samples before this term lack the other replicas' load: no scale-in until they hold it.
    const newTerm = this.options.peers && now - (this.leadingSince ?? now) < settings.stableWindowMs;
    if (newTerm && desired < replicas) desired = Math.min(replicas, settings.max);
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
