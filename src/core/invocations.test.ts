/**
 * What an asynchronous invocation's attempt answered means (succeeded, failed, retry) by status code,
 * and the retry delay: doubling per attempt with equal jitter, never past the cap.
 */
import { describe, expect, it } from 'vitest';
import { MAX_BACKOFF_MS, retryDelayMs, verdictOf } from './invocations.js';

describe('what an attempt answered means', () => {
  it.each([
    [200, 'succeeded'],
    [204, 'succeeded'],
    [302, 'succeeded'],
    [400, 'failed'],
    [404, 'failed'],
    [418, 'failed'],
    [499, 'failed'],
    [408, 'retry'],
    [429, 'retry'],
    [500, 'retry'],
    [502, 'retry'],
    [503, 'retry'],
    [504, 'retry'],
    [undefined, 'retry'],
  ] as const)('%s is %s', (status, verdict) => {
    expect(verdictOf(status)).toBe(verdict);
  });
});

describe('the delay before a retry', () => {
  it('doubles per attempt from the backoff, with equal jitter: between half the step and all of it', () => {
    expect(retryDelayMs(1000, 2, () => 0)).toBe(500);
    expect(retryDelayMs(1000, 2, () => 1)).toBe(1000);
    expect(retryDelayMs(1000, 3, () => 0)).toBe(1000);
    expect(retryDelayMs(1000, 3, () => 1)).toBe(2000);
    expect(retryDelayMs(1000, 5, () => 0.5)).toBe(6000);
  });

  it('never exceeds the cap, however many attempts came before', () => {
    expect(retryDelayMs(60_000, 40, () => 1)).toBe(MAX_BACKOFF_MS);
    expect(retryDelayMs(60_000, 40, () => 0)).toBe(MAX_BACKOFF_MS / 2);
  });
});
