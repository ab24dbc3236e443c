/**
 * The proxy's per-function counts as plain numbers: responses by status code and a histogram of
 * durations. They cost a Map lookup and a few additions per request (prom-client's own Counter and
 * Histogram validate and hash labels on every call); metrics turns them into series when scraped.
 * Plain data, so the gateway thread's counts cross to the main thread by structured clone.
 */
import { objectKey } from './object-key.js';

export const PROXY_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Unknown names share one label value, so a scan of random `/fn/…` paths cannot grow the series. */
export const UNKNOWN_FUNCTION = '_unknown';

export interface ProxyTally {
  namespace: string;
  function: string;
  /** Responses by status code. */
  codes: Map<number, number>;
  /** Observations per bucket of PROXY_SECONDS_BUCKETS, not cumulative; the last is +Inf only. */
  buckets: number[];
  sum: number;
  count: number;
}

/** Requests of one function waiting in a proxy's admission queue now (see proxy/admission.ts). */
export interface QueueDepth {
  namespace: string;
  function: string;
  depth: number;
}

export class ProxyTallies {
  /** Per `namespace/name`, and one entry for every unknown name. */
  private readonly tallies = new Map<string, ProxyTally>();

  record(namespace: string, name: string, statusCode: number, durationMs: number, known = true): void {
    const tally = this.tallyOf(namespace, name, known);
    tally.codes.set(statusCode, (tally.codes.get(statusCode) ?? 0) + 1);
    const seconds = durationMs / 1000;
    let bucket = 0;
    while (bucket < PROXY_SECONDS_BUCKETS.length && seconds > (PROXY_SECONDS_BUCKETS[bucket] as number))
      bucket++;
    tally.buckets[bucket] = (tally.buckets[bucket] as number) + 1;
    tally.sum += seconds;
    tally.count++;
  }

  /** Every tally counted so far, leaving none behind: what one thread hands to another. */
  take(): ProxyTally[] {
    const taken = [...this.tallies.values()];
    this.tallies.clear();
    return taken;
  }

  /** Adds tallies another proxy counted; `isKnown` decides again which names are real functions. */
  merge(tallies: readonly ProxyTally[], isKnown: (namespace: string, name: string) => boolean): void {
    for (const other of tallies) {
      const tally = this.tallyOf(other.namespace, other.function, isKnown(other.namespace, other.function));
      for (const [code, count] of other.codes) tally.codes.set(code, (tally.codes.get(code) ?? 0) + count);
      other.buckets.forEach((count, i) => {
        tally.buckets[i] = (tally.buckets[i] as number) + count;
      });
      tally.sum += other.sum;
      tally.count += other.count;
    }
  }

  values(): IterableIterator<ProxyTally> {
    return this.tallies.values();
  }

  private tallyOf(namespace: string, name: string, known: boolean): ProxyTally {
    const key = known ? objectKey(namespace, name) : UNKNOWN_FUNCTION;
    let tally = this.tallies.get(key);
    if (!tally) {
      tally = {
        namespace: known ? namespace : UNKNOWN_FUNCTION,
        function: known ? name : UNKNOWN_FUNCTION,
        codes: new Map(),
        buckets: new Array(PROXY_SECONDS_BUCKETS.length + 1).fill(0),
        sum: 0,
        count: 0,
      };
      this.tallies.set(key, tally);
    }
    return tally;
  }
}
