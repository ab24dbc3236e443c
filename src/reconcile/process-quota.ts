/**
 * The running-process limit per namespace. Counts are kept in memory, per function, as reconciles
 * admit and release them: counting from the store on every reconcile would cost a list of the whole
 * namespace each time. After a restart functions are admitted again as they are reconciled, serving
 * ones first (the fair gate puts them ahead), so what served before a restart serves after it.
 * A function refused for want of room is remembered, and handed to `onRoom` when room is given back
 * in its namespace, so it starts then rather than at the next resync.
 */

import { replicasOf } from '../core/defaults.js';
import type { SlessFunction } from '../core/resources.js';

export class ProcessQuota {
  private readonly max: number;
  private readonly admitted = new Map<string, Map<string, number>>();
  /** Per namespace, the functions refused since room was last given back there. */
  private readonly refused = new Map<string, Set<string>>();
  private readonly onRoom: (namespace: string, name: string) => void;

  /** `onRoom` queues a refused function again once its namespace has room to give. */
  constructor(max: number, onRoom: (namespace: string, name: string) => void = () => undefined) {
    this.max = max;
    this.onRoom = onRoom;
  }

  /** Admits the function's replicas, or says why not; an admitted function may change its count. */
  admit(fn: SlessFunction): string | undefined {
    const { namespace, name } = fn.metadata;
    const replicas = Math.max(1, Number(replicasOf(fn)));
    const counts = this.admitted.get(namespace) ?? new Map<string, number>();
    let others = 0;
    for (const [other, count] of counts) if (other !== name) others += count;
    if (others + replicas > this.max) {
      const waiting = this.refused.get(namespace) ?? new Set<string>();
      waiting.add(name);
      this.refused.set(namespace, waiting);
      return `namespace ${namespace} already runs ${others} of its ${this.max} processes; this function needs ${replicas} (quota SLESS_QUOTA_PROCESSES)`;
    }
    this.refused.get(namespace)?.delete(name);
    const before = counts.get(name);
    counts.set(name, replicas);
    this.admitted.set(namespace, counts);
    if (before !== undefined && replicas < before) this.roomIn(namespace);
    return undefined;
  }

  release(namespace: string, name: string): void {
    this.refused.get(namespace)?.delete(name);
    const counts = this.admitted.get(namespace);
    const held = counts?.get(name);
    counts?.delete(name);
    if (counts?.size === 0) this.admitted.delete(namespace);
    if (held !== undefined) this.roomIn(namespace);
  }

  /** Room was given back: every function refused there tries again (the quota decides once more). */
  private roomIn(namespace: string): void {
    const waiting = this.refused.get(namespace);
    if (!waiting) return;
    this.refused.delete(namespace);
    for (const name of [...waiting].sort()) this.onRoom(namespace, name);
  }
}
