/**
 * Recently seen delivery ids per source, so a redelivered webhook does not sync twice. Bounded: a
 * fixed number of ids per source and of sources, least recently used dropped first.
 */
export class RecentDeliveries {
  private readonly perSource: number;
  private readonly maxSources: number;
  private readonly seen = new Map<string, Set<string>>();

  constructor(options: { perSource?: number; maxSources?: number } = {}) {
    this.perSource = options.perSource ?? 500;
    this.maxSources = options.maxSources ?? 1000;
  }

  /** Records the id; true when it had been seen already (a redelivery). */
  checkAndRecord(sourceKey: string, deliveryId: string): boolean {
    const ids = this.seen.get(sourceKey) ?? new Set<string>();
    this.seen.delete(sourceKey);
    this.seen.set(sourceKey, ids);
    if (ids.has(deliveryId)) return true;
    ids.add(deliveryId);
    // Sets iterate in insertion order, so the first is the oldest.
    while (ids.size > this.perSource) {
      const oldest = ids.values().next().value;
      if (oldest === undefined) break;
      ids.delete(oldest);
    }
    while (this.seen.size > this.maxSources) {
      const oldest = this.seen.keys().next().value;
      if (oldest === undefined) break;
      this.seen.delete(oldest);
    }
    return false;
  }
}
