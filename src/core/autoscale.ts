/**
 * The autoscaling decision both platforms run, in the manner of Knative's KPA: desired instances are
 * the in-flight requests the proxies counted, averaged over a stable window, divided by the target
 * per instance. When the short panic window's average would need twice the instances that are ready,
 * the decision panics: it follows the panic window and never scales down until load has stayed below
 * that threshold for a whole stable window. Pure: time and samples come in, a number goes out.
 */
import type { SlessFunction } from './resources.js';

export interface ScaleSettings {
  min: number;
  max: number;
  /** In-flight requests per instance aimed at. */
  target: number;
  stableWindowMs: number;
  panicWindowMs: number;
  /** Panic starts when the panic window asks for this many times the ready instances. */
  panicThreshold: number;
  /** At most this many times the ready instances in one decision (bounds a runaway). */
  maxScaleUpRate: number;
  /** At least the ready instances divided by this in one decision (no cliff on the way down). */
  maxScaleDownRate: number;
}

export const DEFAULT_TARGET = 10;
export const DEFAULT_STABLE_WINDOW_SEC = 60;

/** A function's `spec.scale` with its defaults; undefined when the function does not autoscale. */
export function scaleSettingsOf(fn: SlessFunction): ScaleSettings | undefined {
  const scale = fn.spec.scale;
  if (!scale) return undefined;
  const min = scale.min ?? 1;
  const stableWindowMs = (scale.stableWindowSec ?? DEFAULT_STABLE_WINDOW_SEC) * 1000;
  return {
    min,
    max: Math.max(scale.max ?? 10, min),
    target: scale.target ?? DEFAULT_TARGET,
    stableWindowMs,
    panicWindowMs: Math.max(stableWindowMs / 10, 1000),
    panicThreshold: 2,
    maxScaleUpRate: 1000,
    maxScaleDownRate: 2,
  };
}

/** The in-flight requests seen over one sampling period, summed over every proxy that counts them. */
export interface ConcurrencySample {
  at: number;
  concurrency: number;
}

/** What a decision carries to the next: when panic began (or was last renewed), and its peak. */
export interface ScaleState {
  panicSince?: number;
  panicPeak: number;
}

export const INITIAL_SCALE_STATE: ScaleState = { panicPeak: 0 };

export interface ScaleDecision {
  desired: number;
  state: ScaleState;
  panicking: boolean;
  stableConcurrency: number;
  panicConcurrency: number;
}

function averageSince(samples: readonly ConcurrencySample[], from: number, now: number): number {
  let sum = 0;
  let count = 0;
  for (const sample of samples)
    if (sample.at > from && sample.at <= now) {
      sum += sample.concurrency;
      count++;
    }
  return count === 0 ? 0 : sum / count;
}

export function decideScale(
  settings: ScaleSettings,
  samples: readonly ConcurrencySample[],
  now: number,
  readyInstances: number,
  state: ScaleState,
): ScaleDecision {
  const stableConcurrency = averageSince(samples, now - settings.stableWindowMs, now);
  const panicConcurrency = averageSince(samples, now - settings.panicWindowMs, now);
  const ready = Math.max(readyInstances, 1);
  const wantStable = Math.ceil(stableConcurrency / settings.target);
  const wantPanic = Math.ceil(panicConcurrency / settings.target);
  let panicSince = state.panicSince;
  if (panicConcurrency / settings.target >= ready * settings.panicThreshold) panicSince = now;
  else if (panicSince !== undefined && now - panicSince >= settings.stableWindowMs) panicSince = undefined;
  const panicking = panicSince !== undefined;
  // Panic only ever adds: the stable window's answer stands under it.
  let desired = panicking ? Math.max(wantPanic, wantStable, state.panicPeak) : wantStable;
  // Scale in only as far as the panic window agrees: when a panic that began early in a ramp ends,
  // the stable window still holds the ramp's lower levels, and following it alone removed instances
  // the load of the last seconds was using (a real-node ramp lost 2 of 10 pods at full load).
  if (!panicking && desired < ready) desired = Math.max(desired, Math.min(wantPanic, ready));
  desired = Math.min(desired, Math.ceil(ready * settings.maxScaleUpRate));
  desired = Math.max(desired, Math.floor(ready / settings.maxScaleDownRate));
  desired = Math.min(Math.max(desired, settings.min), settings.max);
  return {
    desired,
    state: panicking ? { panicSince, panicPeak: desired } : { panicPeak: 0 },
    panicking,
    stableConcurrency,
    panicConcurrency,
  };
}
