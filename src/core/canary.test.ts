/**
 * A canary's steps: decideCanary holds within a step, advances, promotes after the last, and rolls back
 * on an error rate or p99 over its limit (the rate only once enough answers came); AnswerTally counts 5xx
 * answers and a p99 over its latest latencies.
 */
import { describe, expect, it } from 'vitest';
import { AnswerTally, decideCanary } from './canary.js';

const spec = { steps: [10, 50], stepSeconds: 10, maxErrorRate: 0.05, maxP99Ms: 200 };

describe('decideCanary', () => {
  it('holds within a step, looking again soon', () => {
    expect(decideCanary(spec, 0, 0, { requests: 5, errors: 0 }, 1000)).toEqual({
      action: 'hold',
      afterMs: 500,
    });
    expect(decideCanary(spec, 0, 0, { requests: 5, errors: 0 }, 9800)).toEqual({
      action: 'hold',
      afterMs: 200,
    });
  });

  it('advances after stepSeconds, then promotes after the last step', () => {
    expect(decideCanary(spec, 0, 0, { requests: 50, errors: 2 }, 10_000)).toEqual({
      action: 'advance',
      step: 1,
      weight: 50,
    });
    expect(decideCanary(spec, 1, 0, { requests: 0, errors: 0 }, 10_000)).toEqual({ action: 'promote' });
  });

  it('rolls back on an error rate over the limit once enough answers came, not before', () => {
    expect(decideCanary(spec, 0, 0, { requests: 10, errors: 3 }, 1000).action).toBe('hold');
    const breach = decideCanary(spec, 0, 0, { requests: 20, errors: 2 }, 1000);
    expect(breach).toEqual({
      action: 'rollBack',
      why: 'error rate over 5.0%: 2 of 20 answers were 5xx (10.0%)',
    });
    // Exactly at the limit passes.
    expect(decideCanary(spec, 0, 0, { requests: 20, errors: 1 }, 1000).action).toBe('hold');
    // A step that ends is judged on what it got, however little.
    expect(decideCanary(spec, 0, 0, { requests: 3, errors: 1 }, 10_000).action).toBe('rollBack');
  });

  it('rolls back on a p99 over the limit', () => {
    const slow = decideCanary(spec, 1, 0, { requests: 40, errors: 0, p99Ms: 250 }, 1000);
    expect(slow).toEqual({
      action: 'rollBack',
      why: 'p99 over 200 ms: 0 of 40 answers were 5xx (0.0%), p99 250 ms',
    });
  });
});

describe('AnswerTally', () => {
  it('counts 5xx answers and a p99 over the latest latencies, and starts over on reset', () => {
    const tally = new AnswerTally(100);
    for (let i = 1; i <= 100; i++) tally.record(i % 10 === 0 ? 503 : 200, i);
    expect(tally.figures()).toEqual({ requests: 100, errors: 10, p99Ms: 99 });
    // The window holds the latest 100: older latencies leave it, the counts keep everything.
    for (let i = 0; i < 100; i++) tally.record(200, 1);
    expect(tally.figures()).toEqual({ requests: 200, errors: 10, p99Ms: 1 });
    tally.reset();
    expect(tally.figures()).toEqual({ requests: 0, errors: 0 });
    tally.record(404, 5);
    expect(tally.figures()).toEqual({ requests: 1, errors: 0, p99Ms: 5 });
  });
});
