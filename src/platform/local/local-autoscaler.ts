/**
 * Concurrency-based scaling on the local platform, with the decision the kube autoscaler makes
 * (core/autoscale.ts): each tick samples the in-flight requests over all instances of every function
 * with `spec.scale`, from the ActivityBoard both proxy threads count on, and asks the platform for the
 * instances the stable and panic windows want, between `min` (at least one: scaling to zero is the
 * idle stop's) and `max`.
 */
import type { Logger } from 'pino';
import {
  type ConcurrencySample,
  decideScale,
  INITIAL_SCALE_STATE,
  type ScaleState,
  scaleSettingsOf,
} from '../../core/autoscale.js';
import { asError } from '../../core/errors.js';
import type { SlessFunction } from '../../core/resources.js';

/** A function that may scale now: its serving revision runs, and nothing else (a canary) decides. */
export interface ScalableFunction {
  key: string;
  fn: SlessFunction;
  /** Requests in flight over all its instances. */
  inflight: number;
  /** Instances that run now. */
  instances: number;
}

export interface ScalablePlatform {
  scalable(): ScalableFunction[];
  scaleTo(key: string, instances: number): Promise<void>;
}

interface Tracked {
  samples: ConcurrencySample[];
  state: ScaleState;
}

/** How often the autoscaler looks at the load, unless told otherwise. */
export const DEFAULT_AUTOSCALE_TICK_MS = 1000;

export class LocalAutoscaler {
  private readonly options: { platform: ScalablePlatform; logger: Logger; tickMs?: number };
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(options: { platform: ScalablePlatform; logger: Logger; tickMs?: number }) {
    this.options = options;
  }

  start(): void {
    const next = () => {
      this.timer = setTimeout(async () => {
        await this.tick();
        if (this.timer) next();
      }, this.options.tickMs ?? DEFAULT_AUTOSCALE_TICK_MS);
      this.timer.unref();
    };
    next();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One sample and one decision per scalable function. */
  async tick(now = Date.now()): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const functions = this.options.platform.scalable();
      const present = new Set(functions.map((f) => f.key));
      for (const key of this.tracked.keys()) if (!present.has(key)) this.tracked.delete(key);
      await Promise.all(functions.map((f) => this.decide(f, now)));
    } finally {
      this.ticking = false;
    }
  }

  private async decide(scalable: ScalableFunction, now: number): Promise<void> {
    const settings = scaleSettingsOf(scalable.fn);
    if (!settings) return;
    let tracked = this.tracked.get(scalable.key);
    if (!tracked) {
      tracked = { samples: [], state: INITIAL_SCALE_STATE };
      this.tracked.set(scalable.key, tracked);
    }
    tracked.samples.push({ at: now, concurrency: scalable.inflight });
    while ((tracked.samples[0]?.at ?? now) <= now - settings.stableWindowMs) tracked.samples.shift();
    const decision = decideScale(settings, tracked.samples, now, scalable.instances, tracked.state);
    tracked.state = decision.state;
    const desired = Math.max(decision.desired, 1);
    if (desired === scalable.instances) return;
    this.options.logger.info(
      {
        function: scalable.key,
        from: scalable.instances,
        to: desired,
        stableConcurrency: decision.stableConcurrency,
        panic: decision.panicking,
      },
      'scaling',
    );
    try {
      await this.options.platform.scaleTo(scalable.key, desired);
    } catch (error) {
      this.options.logger.warn({ function: scalable.key, err: asError(error).message }, 'scaling failed');
    }
  }
}
