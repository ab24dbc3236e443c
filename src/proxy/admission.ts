/**
 * Admission to a function with a concurrency limit: at most `limit` requests in flight per function,
 * the next ones waiting in a bounded FIFO queue, and the rest turned away at once. Synchronous and
 * free of I/O, so that both proxies (the gateway thread's and the main thread's) share it and its
 * guarantees can be checked by property tests alone.
 */
import type { AdmissionLimits } from '../core/interfaces.js';

/**
 * The queue bound when `spec.scale.queue` is absent: ten times the limit, enough to absorb a burst
 * while the autoscaler adds instances, small enough that a queued request is served within a few
 * handler durations rather than piling up until its timeout.
 */
export const DEFAULT_QUEUE_FACTOR = 10;

/** The admission a function's spec asks for with `instances` serving; undefined: no limit. */
export function admissionLimits(
  scale: { concurrency?: number; queue?: number } | undefined,
  instances: number,
): AdmissionLimits | undefined {
  const concurrency = scale?.concurrency;
  if (concurrency === undefined) return undefined;
  const limit = concurrency * Math.max(1, instances);
  return { limit, queue: scale?.queue ?? limit * DEFAULT_QUEUE_FACTOR };
}

/** The route's `admission` field as a spread: nothing when the function has no limit. */
export function admissionOf(
  scale: { concurrency?: number; queue?: number } | undefined,
  instances: number,
): { admission?: AdmissionLimits } {
  const admission = admissionLimits(scale, instances);
  return admission ? { admission } : {};
}

export type Admission =
  | { outcome: 'admitted' }
  /** `leave` takes the request out of the queue (its client went away, or it waited too long). */
  | { outcome: 'queued'; leave: () => void }
  | { outcome: 'rejected' };

interface Waiter {
  admit: () => void;
}

/** One function's admission. `done` must be called once per admitted request, when it ends. */
export class AdmissionGate {
  private inFlight = 0;
  /** Insertion order is FIFO order; deleting a waiter that leaves is O(1). */
  private readonly waiting = new Set<Waiter>();

  constructor(private limits: AdmissionLimits) {}

  get active(): number {
    return this.inFlight;
  }

  get queued(): number {
    return this.waiting.size;
  }

  /** True when nothing is in flight or waiting: the gate can be dropped. */
  get idle(): boolean {
    return this.inFlight === 0 && this.waiting.size === 0;
  }

  /**
   * New limits (instances came or went): a raised limit admits waiters at once; a lowered one lets
   * the requests in flight end and admits no one until they are below it.
   */
  update(limits: AdmissionLimits): void {
    this.limits = limits;
    this.admitWaiting();
  }

  /**
   * Admits the request now, queues it (`admit` is called once a slot frees, never synchronously
   * here), or rejects it. A request never overtakes one already waiting.
   */
  request(admit: () => void): Admission {
    if (this.waiting.size === 0 && this.inFlight < this.limits.limit) {
      this.inFlight++;
      return { outcome: 'admitted' };
    }
    if (this.waiting.size >= this.limits.queue) return { outcome: 'rejected' };
    const waiter: Waiter = { admit };
    this.waiting.add(waiter);
    return { outcome: 'queued', leave: () => this.waiting.delete(waiter) };
  }

  /** An admitted request ended: its slot goes to the longest waiting one. */
  done(): void {
    if (this.inFlight > 0) this.inFlight--;
    this.admitWaiting();
  }

  private admitWaiting(): void {
    while (this.inFlight < this.limits.limit) {
      const next = this.waiting.values().next();
      if (next.done) return;
      this.waiting.delete(next.value);
      this.inFlight++;
      next.value.admit();
    }
  }
}
