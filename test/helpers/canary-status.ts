/**
 * The status a canary rolled back in its first step shows, on either platform (golden values both
 * canary tests hold it to): the step and weight it stopped at, the figures it judged by, the message,
 * the old revision still serving, and Ready False / Stalled True with the reason.
 */
import { expect } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';

export function expectRolledBackInFirstStep(
  s: FunctionStatus,
  stable: string | undefined,
  firstWeight: number,
): void {
  const canary = s.canary;
  expect(canary?.step).toBe(0);
  expect(canary?.weight).toBe(firstWeight);
  expect(canary?.figures?.requests).toBeGreaterThanOrEqual(20);
  expect(canary?.figures?.errorRate).toBeGreaterThan(0.05);
  expect(canary?.figures?.p99Ms).toBeGreaterThan(0);
  expect(canary?.message).toMatch(
    /rolled back at 10% \(step 1 of 2\): error rate over 5\.0%: \d+ of \d+ answers were 5xx/,
  );
  expect(s.servingRevision).toBe(stable);
  expect(s.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
    status: 'False',
    reason: 'CanaryRolledBack',
  });
  // Stalled: the same revision would breach again, so only a new one moves it on.
  expect(s.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
    status: 'True',
    reason: 'CanaryRolledBack',
    message: canary?.message,
  });
}
