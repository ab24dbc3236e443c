/**
 * Remembers the last few builds of each function in memory, because a function's status keeps only
 * its last build while the API offers a short history with log tails. It is bounded, so a
 * long-running server does not grow with the number of builds or functions.
 */
import { objectKey } from '../core/object-key.js';
import type { BuildRecord, SlessFunction } from '../core/resources.js';

/** A finished (or failed) build of one function, as the history now holds it. */
export type BuildListener = (namespace: string, name: string, record: BuildRecord) => void;

/**
 * The last few builds per function, fed by the builder's onBuildFinished hook. Status keeps only the
 * last build; this gives the API a short history with log tails. Bounded in both directions: builds
 * per function and functions overall (least recently built forgotten first).
 */
export class BuildHistory {
  private readonly perFunction: number;
  private readonly maxFunctions: number;
  private readonly records = new Map<string, BuildRecord[]>();
  private readonly listeners = new Set<BuildListener>();

  constructor(options: { perFunction?: number; maxFunctions?: number } = {}) {
    this.perFunction = options.perFunction ?? 10;
    this.maxFunctions = options.maxFunctions ?? 1000;
  }

  record(record: BuildRecord, fn: SlessFunction): void {
    const key = objectKey(fn.metadata.namespace, fn.metadata.name);
    const list = this.records.get(key) ?? [];
    this.records.delete(key);
    list.unshift(structuredClone(record));
    list.length = Math.min(list.length, this.perFunction);
    this.records.set(key, list);
    while (this.records.size > this.maxFunctions) {
      const oldest = this.records.keys().next().value;
      if (oldest === undefined) break;
      this.records.delete(oldest);
    }
    for (const listener of this.listeners)
      listener(fn.metadata.namespace, fn.metadata.name, structuredClone(record));
  }

  /** Told of every recorded build (the dashboard's live feed); returns the unsubscribe. */
  subscribe(listener: BuildListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  list(namespace: string, name: string): readonly BuildRecord[] {
    return this.records.get(objectKey(namespace, name)) ?? [];
  }
}
