/**
 * Holds `/fn/` requests of an always-on function while its Deployment reports no available replica,
 * until the route cache says otherwise or the wait's bound passes. Pods that stop being available for
 * a few seconds (a rollout's last old pod gone before the new one is ready, or the cluster's
 * controller-manager marking a node's pods not ready after an API-server restart, until the kubelet
 * reports again) then cost their callers latency rather than a 503. Bounded twice: in time, and in
 * how many requests one function may hold; beyond either, the caller gets the 503 at once.
 */

import { objectKey } from '../../core/object-key.js';
import type { KubeRouteCache } from './route-cache.js';

export interface ReplicaWaitOptions {
  cache: Pick<KubeRouteCache, 'onChange' | 'connected'>;
  /** How long one request may be held (the activation timeout: the same wait as a start from zero). */
  timeoutMs: number;
  /** How many requests one function may hold at once. */
  maxHeldPerFunction: number;
}

/** Why the wait ended: a change to look at, its bound, a full queue, or no watch to tell it. */
export type ReplicaWaitEnd = 'changed' | 'timeout' | 'full' | 'disconnected';

interface Waiter {
  /** Whether the change is the one waited for; re-read on each change of this function. */
  done(): boolean;
  settle(end: ReplicaWaitEnd): void;
}

export class ReplicaWait {
  private readonly options: ReplicaWaitOptions;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private unsubscribe: (() => void) | undefined;

  constructor(options: ReplicaWaitOptions) {
    this.options = options;
  }

  /** The bound of one wait, in seconds, as an answer says it. */
  get timeoutSec(): number {
    return Math.round(this.options.timeoutMs / 1000);
  }

  /** Requests of `namespace/name` held now. */
  held(namespace: string, name: string): number {
    return this.waiters.get(objectKey(namespace, name))?.size ?? 0;
  }

  /**
   * Resolves once `ready()` is true after a change of this function in the cache ('changed'), or
   * with why it stopped waiting. While the watches are down no change can come, so it does not wait.
   */
  wait(namespace: string, name: string, ready: () => boolean): Promise<ReplicaWaitEnd> {
    if (!this.options.cache.connected()) return Promise.resolve('disconnected');
    const key = objectKey(namespace, name);
    let set = this.waiters.get(key);
    if ((set?.size ?? 0) >= this.options.maxHeldPerFunction) return Promise.resolve('full');
    this.unsubscribe ??= this.options.cache.onChange((ns, n) => this.changed(objectKey(ns, n)));
    if (!set) {
      set = new Set();
      this.waiters.set(key, set);
    }
    const waiting = set;
    return new Promise<ReplicaWaitEnd>((resolve) => {
      const waiter: Waiter = {
        done: ready,
        settle: (end) => {
          clearTimeout(timer);
          waiting.delete(waiter);
          if (waiting.size === 0 && this.waiters.get(key) === waiting) this.waiters.delete(key);
          resolve(end);
        },
      };
      const timer = setTimeout(() => waiter.settle('timeout'), this.options.timeoutMs);
      waiting.add(waiter);
    });
  }

  /** Ends every wait at once (the proxy stops): each caller resolves as it would after its bound. */
  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const set of [...this.waiters.values()]) for (const waiter of [...set]) waiter.settle('timeout');
  }

  private changed(key: string): void {
    const set = this.waiters.get(key);
    if (!set) return;
    for (const waiter of [...set]) if (waiter.done()) waiter.settle('changed');
  }
}
