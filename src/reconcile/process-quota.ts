/**
 * The running-process limit per namespace. Counts are kept in memory, per function, as reconciles
 * admit and release them: counting from the store on every reconcile would cost a list of the whole
 * namespace each time. After a restart functions are admitted again as they are reconciled, serving
 * ones first (the fair gate puts them ahead), so what served before a restart serves after it.
 */
import type { SlessFunction } from '../core/resources.js';

export class ProcessQuota {
  private readonly max: number;
  private readonly admitted = new Map<string, Map<string, number>>();

  constructor(max: number) {
    this.max = max;
  }

  /** Admits the function's replicas, or says why not; an admitted function may change its count. */
  admit(fn: SlessFunction): string | undefined {
    const { namespace, name } = fn.metadata;
    const replicas = Math.max(1, Number(fn.spec.replicas ?? 1));
    const counts = this.admitted.get(namespace) ?? new Map<string, number>();
    let others = 0;
    for (const [other, count] of counts) if (other !== name) others += count;
    if (others + replicas > this.max)
      return `namespace ${namespace} already runs ${others} of its ${this.max} processes; this function needs ${replicas} (quota SLESS_QUOTA_PROCESSES)`;
    counts.set(name, replicas);
    this.admitted.set(namespace, counts);
    return undefined;
  }

  release(namespace: string, name: string): void {
    const counts = this.admitted.get(namespace);
    counts?.delete(name);
    if (counts?.size === 0) this.admitted.delete(namespace);
  }
}
