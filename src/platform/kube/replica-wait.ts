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

/** The requests one function holds, and how to tell that it has a replica again. */
interface Held {
  /** Whether the function has an available replica now; read once per change of it. */
  ready(): boolean;
  settles: Set<(end: ReplicaWaitEnd) => void>;
}

export class ReplicaWait {
  private readonly options: ReplicaWaitOptions;
  private readonly byFunction = new Map<string, Held>();
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
    return this.byFunction.get(objectKey(namespace, name))?.settles.size ?? 0;
  }

  /**
   * Resolves once `ready()` is true after a change of this function in the cache ('changed'), or
   * with why it stopped waiting. While the watches are down no change can come, so it does not wait.
   * Every request of one function asks the same `ready`: it is read once per change, for all of them.
   */
  wait(namespace: string, name: string, ready: () => boolean): Promise<ReplicaWaitEnd> {
    if (!this.options.cache.connected()) return Promise.resolve('disconnected');
    const key = objectKey(namespace, name);
    const found = this.byFunction.get(key);
    if ((found?.settles.size ?? 0) >= this.options.maxHeldPerFunction) return Promise.resolve('full');
    this.unsubscribe ??= this.options.cache.onChange((ns, n) => this.changed(objectKey(ns, n)));
    const held = found ?? { ready, settles: new Set() };
    this.byFunction.set(key, held);
    return new Promise<ReplicaWaitEnd>((resolve) => {
      const settle = (end: ReplicaWaitEnd) => {
        clearTimeout(timer);
        held.settles.delete(settle);
        if (held.settles.size === 0 && this.byFunction.get(key) === held) this.byFunction.delete(key);
        resolve(end);
      };
      const timer = setTimeout(() => settle('timeout'), this.options.timeoutMs);
      held.settles.add(settle);
    });
  }

  /** Ends every wait at once (the proxy stops): each caller resolves as it would after its bound. */
  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const held of [...this.byFunction.values()])
      for (const settle of [...held.settles]) settle('timeout');
  }

  private changed(key: string): void {
    const held = this.byFunction.get(key);
    if (!held?.ready()) return;
    for (const settle of [...held.settles]) settle('changed');
  }
}
