/**
 * The proxies' canary split: which requests go to the canary (golden turns: exactly its weight of
 * every hundred, at fixed places), and what each thread counts of its answers, per step.
 */
import { describe, expect, it } from 'vitest';
import type { MirroredCanary } from '../core/interfaces.js';
import { CanarySplits } from './canary-split.js';

const canary = (weight: number, since = 1): MirroredCanary => ({
  revision: 'r2',
  weight,
  since,
  endpoints: ['10.0.0.1', '10.0.0.2'],
});

/** The 1-based places, of `count` requests, that went to the canary. */
function places(splits: CanarySplits, of: MirroredCanary, count: number): number[] {
  const taken: number[] = [];
  for (let i = 1; i <= count; i++) if (splits.choose('ns/f', of)) taken.push(i);
  return taken;
}

describe('CanarySplits', () => {
  it('gives the canary exactly its weight of every hundred requests, at the same places each time', () => {
    expect(places(new CanarySplits(), canary(10), 100)).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
    expect(places(new CanarySplits(), canary(50), 10)).toEqual([2, 4, 6, 8, 10]);
    expect(places(new CanarySplits(), canary(1), 100)).toEqual([100]);
    expect(places(new CanarySplits(), canary(10), 2000)).toHaveLength(200);
    expect(places(new CanarySplits(), canary(50), 2000)).toHaveLength(1000);
  });

  it('counts the canary answers per step, once each, and starts over when taken', () => {
    const splits = new CanarySplits();
    // At 100% every request is the canary's, each observed once.
    for (const status of [200, 500, 200, 503]) splits.choose('ns/f', canary(100))?.observe(status, 5);
    const [count] = splits.take();
    expect(count).toMatchObject({ key: 'ns/f', revision: 'r2', since: 1 });
    expect(count?.requests).toBe(4);
    expect(count?.errors).toBe(2);
    expect(count?.latencies).toEqual([5, 5, 5, 5]);
    expect(splits.take()).toEqual([]);
    // A new step: what the step before counted and was not taken is dropped.
    splits.choose('ns/f', canary(100, 1))?.observe(500, 1);
    splits.choose('ns/f', canary(100, 2))?.observe(200, 1);
    expect(splits.take()).toEqual([
      { key: 'ns/f', revision: 'r2', since: 2, requests: 1, errors: 0, latencies: [1] },
    ]);
  });
});
