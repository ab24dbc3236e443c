/**
 * Canary rollouts, decided from what the proxies counted: a new revision takes each step's share of
 * a function's requests for `stepSeconds`, then the next, then all of them; answers that breach the
 * error-rate or p99 limit send every request back to the old revision. Pure: the figures come in,
 * a decision goes out; the reconciler carries it out and the platform splits the traffic.
 */

/** `spec.rollout.canary` as the schema admits it. */
export interface CanarySpec {
  /** The new revision's share of requests in each step, in percent (1..99). */
  steps: readonly number[];
  stepSeconds?: number;
  /** The largest share of 5xx answers (0..1) the new revision may give. */
  maxErrorRate?: number;
  /** The largest p99 latency the new revision may show, in milliseconds. */
  maxP99Ms?: number;
  /** Answers needed before a step is judged early; a step that ends is judged on what it got. */
  minRequests?: number;
}

export const CANARY_DEFAULTS = { stepSeconds: 60, maxErrorRate: 0.05, minRequests: 20 } as const;

/** How often a step in progress is looked at: a breach is caught this soon after it happens. */
export const CANARY_CHECK_MS = 500;

/** What one revision answered since its step began. */
export interface AnswerFigures {
  requests: number;
  /** Answers of 500 and above, the proxy's own 502/503/504 included. */
  errors: number;
  /** Over the latest answers (bounded); absent before the first. */
  p99Ms?: number;
}

export type CanaryDecision =
  | { action: 'hold'; afterMs: number }
  | { action: 'advance'; step: number; weight: number }
  | { action: 'promote' }
  | { action: 'rollBack'; why: string };

export function errorRateOf(figures: AnswerFigures): number {
  return figures.requests === 0 ? 0 : figures.errors / figures.requests;
}

/** The figures in words, for status messages and Events. */
export function describeFigures(figures: AnswerFigures): string {
  const rate = (errorRateOf(figures) * 100).toFixed(1);
  const p99 = figures.p99Ms === undefined ? '' : `, p99 ${Math.round(figures.p99Ms)} ms`;
  return `${figures.errors} of ${figures.requests} answers were 5xx (${rate}%)${p99}`;
}

/**
 * What to do with the canary at `step` (an index into steps), begun at `stepStartedMs`, given the
 * new revision's figures since then.
 */
export function decideCanary(
  spec: CanarySpec,
  step: number,
  stepStartedMs: number,
  figures: AnswerFigures,
  nowMs: number,
): CanaryDecision {
  const stepMs = (spec.stepSeconds ?? CANARY_DEFAULTS.stepSeconds) * 1000;
  const elapsed = nowMs - stepStartedMs;
  const ended = elapsed >= stepMs;
  const judged = figures.requests >= (spec.minRequests ?? CANARY_DEFAULTS.minRequests) || ended;
  if (judged && figures.requests > 0) {
    const maxErrorRate = spec.maxErrorRate ?? CANARY_DEFAULTS.maxErrorRate;
    if (errorRateOf(figures) > maxErrorRate)
      return {
        action: 'rollBack',
        why: `error rate over ${(maxErrorRate * 100).toFixed(1)}%: ${describeFigures(figures)}`,
      };
    if (spec.maxP99Ms !== undefined && (figures.p99Ms ?? 0) > spec.maxP99Ms)
      return { action: 'rollBack', why: `p99 over ${spec.maxP99Ms} ms: ${describeFigures(figures)}` };
  }
  if (!ended) return { action: 'hold', afterMs: Math.min(stepMs - elapsed, CANARY_CHECK_MS) };
  const next = step + 1;
  const weight = spec.steps[next];
  return weight === undefined ? { action: 'promote' } : { action: 'advance', step: next, weight };
}

/** Counts one revision's answers: totals, and the latest latencies for a p99. */
export class AnswerTally {
  private requests = 0;
  private errors = 0;
  private readonly latencies: Float64Array;
  private filled = 0;
  private next = 0;

  constructor(window = 2048) {
    this.latencies = new Float64Array(window);
  }

  record(statusCode: number, durationMs: number): void {
    this.requests++;
    if (statusCode >= 500) this.errors++;
    this.latencies[this.next] = durationMs;
    this.next = (this.next + 1) % this.latencies.length;
    this.filled = Math.min(this.filled + 1, this.latencies.length);
  }

  /** Answers counted elsewhere (another thread): their totals, and their latest latencies. */
  absorb(requests: number, errors: number, latencies: readonly number[]): void {
    this.requests += requests;
    this.errors += errors;
    for (const ms of latencies) {
      this.latencies[this.next] = ms;
      this.next = (this.next + 1) % this.latencies.length;
      this.filled = Math.min(this.filled + 1, this.latencies.length);
    }
  }

  /** The latest latencies counted, oldest first (at most the window). */
  latest(): number[] {
    const size = this.latencies.length;
    const start = this.filled < size ? 0 : this.next;
    return Array.from({ length: this.filled }, (_, i) => this.latencies[(start + i) % size] as number);
  }

  reset(): void {
    this.requests = 0;
    this.errors = 0;
    this.filled = 0;
    this.next = 0;
  }

  figures(): AnswerFigures {
    if (this.filled === 0) return { requests: this.requests, errors: this.errors };
    const sorted = this.latencies.slice(0, this.filled).sort();
    const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] as number;
    return { requests: this.requests, errors: this.errors, p99Ms: p99 };
  }
}

/**
 * Which request goes to the new revision: exactly `weight` of every hundred, spread evenly rather
 * than drawn at random, so a step's share holds over a few hundred requests already.
 */
export class ShareTurns {
  private credit = 0;

  /** True when the next request goes to the new revision, at `weight` percent. */
  takesNext(weight: number): boolean {
    this.credit += weight;
    if (this.credit < 100) return false;
    this.credit -= 100;
    return true;
  }
}

/** One thread's count of a canary's answers, for the thread that judges it to add to its own. */
export interface CanaryCounts {
  key: string;
  revision: string;
  /** The step's start (the canary's `since`): counts of an earlier step are dropped. */
  since: number;
  requests: number;
  errors: number;
  latencies: number[];
}

/**
 * A follower's canary counts of one report interval, on their way to the leader: `seq` strictly
 * increases over the batches one replica takes (across its restarts too, as it follows the clock),
 * so the leader absorbs each batch once however often it arrives.
 */
export interface CanaryBatch {
  seq: number;
  counts: CanaryCounts[];
}
