/**
 * A proxy's side of a kube canary, the same on the main thread and on the gateway thread: which of a
 * function's requests go to the canary (its share of every hundred, in turn), the least busy of the
 * canary's endpoints for each, and the count of the canary's answers, which whoever judges the
 * canary takes from each thread and adds up (see platform/kube/canaries.ts).
 */
import { AnswerTally, type CanaryCounts, ShareTurns } from '../core/canary.js';
import type { MirroredCanary } from '../core/interfaces.js';
import { EndpointPickers, type LeastInFlight } from './least-in-flight.js';

interface Counting {
  revision: string;
  since: number;
  tally: AnswerTally;
}

export interface CanaryPick {
  endpoints: LeastInFlight;
  /** Counts the answer, once per request. */
  observe: (statusCode: number, durationMs: number) => void;
}

export class CanarySplits {
  private readonly turns = new Map<string, ShareTurns>();
  private readonly pickers = new EndpointPickers();
  private readonly counting = new Map<string, Counting>();

  /**
   * Where `key`'s next request goes: the canary's endpoints, counted, for its share of requests;
   * undefined for the serving revision. Kept per function across route changes, so the share holds.
   */
  choose(key: string, canary: MirroredCanary): CanaryPick | undefined {
    let turns = this.turns.get(key);
    if (!turns) {
      turns = new ShareTurns();
      this.turns.set(key, turns);
    }
    if (!turns.takesNext(canary.weight)) return undefined;
    let counting = this.counting.get(key);
    if (counting?.revision !== canary.revision || counting.since !== canary.since) {
      // A new canary or a new step: what the one before counted and was not taken yet is of no use.
      counting = { revision: canary.revision, since: canary.since, tally: new AnswerTally() };
      this.counting.set(key, counting);
    }
    const tally = counting.tally;
    return {
      endpoints: this.pickers.of(key, canary.endpoints),
      observe: (status, ms) => tally.record(status, ms),
    };
  }

  /** The function has no canary (any more): its turns and endpoints are forgotten. */
  drop(key: string): void {
    this.turns.delete(key);
    this.pickers.drop(key);
  }

  /** Every canary's answers counted since the last take, and the counts start over. */
  take(): CanaryCounts[] {
    const counts: CanaryCounts[] = [];
    for (const [key, { revision, since, tally }] of this.counting) {
      const figures = tally.figures();
      if (figures.requests > 0)
        counts.push({
          key,
          revision,
          since,
          requests: figures.requests,
          errors: figures.errors,
          latencies: tally.latest(),
        });
      tally.reset();
      if (!this.turns.has(key)) this.counting.delete(key);
    }
    return counts;
  }
}
