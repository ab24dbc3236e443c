/**
 * The autoscaler's decision and its input: decideScale on fixed loads (stable window, panic on a burst
 * and its hold, the scale-down rate limit) and, by fast-check, properties that must hold for any settings
 * (within [min, max], monotone in load, old samples ignored); ConcurrencyMeter's time-weighted average.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ConcurrencySample,
  decideScale,
  INITIAL_SCALE_STATE,
  type ScaleSettings,
  type ScaleState,
} from './autoscale.js';

const SETTINGS: ScaleSettings = {
  min: 1,
  max: 20,
  target: 5,
  stableWindowMs: 60_000,
  panicWindowMs: 6_000,
  panicThreshold: 2,
  maxScaleUpRate: 1000,
  maxScaleDownRate: 2,
};

/** One sample a second for the `seconds` before `now`, the oldest first. */
function steady(
  concurrency: (secondsAgo: number) => number,
  seconds: number,
  now: number,
): ConcurrencySample[] {
  return Array.from({ length: seconds }, (_, i) => ({
    at: now - (seconds - 1 - i) * 1000,
    concurrency: concurrency(seconds - 1 - i),
  }));
}

const NOW = 1_000_000;

describe('decideScale', () => {
  it.each([
    // [what, concurrency by seconds ago, ready, desired, panicking]
    ['no load: min', () => 0, 1, 1, false],
    ['steady 10 in flight at target 5: 2', () => 10, 2, 2, false],
    ['steady 11: rounds up to 3', () => 11, 3, 3, false],
    ['steady 500 with 20 ready: max, panicking at 5x their capacity', () => 500, 20, 20, true],
    [
      'a burst in the last 6 s at 4x capacity: panic follows the burst',
      (ago: number) => (ago < 6 ? 40 : 0),
      2,
      8,
      true,
    ],
    [
      'a panic under a heavier stable window keeps the stable answer',
      (ago: number) => (ago < 6 ? 25 : 100),
      2,
      19,
      true,
    ],
    ['load gone for 30 s of 60: half the stable average', (ago: number) => (ago >= 30 ? 20 : 0), 4, 2, false],
  ] as const)('%s', (_what, load, ready, desired, panicking) => {
    const decision = decideScale(SETTINGS, steady(load, 60, NOW), NOW, ready, INITIAL_SCALE_STATE);
    expect(decision.desired).toBe(desired);
    expect(decision.panicking).toBe(panicking);
  });

  it('scales down at most by half of what is ready in one decision', () => {
    const decision = decideScale(
      SETTINGS,
      steady(() => 0, 60, NOW),
      NOW,
      10,
      INITIAL_SCALE_STATE,
    );
    expect(decision.desired).toBe(5);
  });

  it('in panic, does not scale down until the panic window has stayed calm for a stable window', () => {
    const burst = steady((ago) => (ago < 6 ? 40 : 0), 60, NOW);
    const first = decideScale(SETTINGS, burst, NOW, 2, INITIAL_SCALE_STATE);
    expect(first).toMatchObject({ desired: 8, panicking: true });
    // The burst is over: 30 s later the panic window is empty, yet the peak holds.
    const later = NOW + 30_000;
    const calm = decideScale(SETTINGS, [...burst, ...steady(() => 0, 30, later)], later, 8, first.state);
    expect(calm).toMatchObject({ desired: 8, panicking: true });
    // A whole stable window after the panic was last renewed: back to the stable decision.
    const after = NOW + 60_000;
    const stable = decideScale(SETTINGS, [...burst, ...steady(() => 0, 60, after)], after, 8, calm.state);
    expect(stable.panicking).toBe(false);
    expect(stable.desired).toBe(4);
  });

  it('leaving a panic at full load keeps the instances the panic window still uses', () => {
    // A ramp: the panic began 60 s ago at 10 in flight and was not renewed; the stable window still
    // holds the ramp's lower levels (average 39), while the last 6 s ran 59 in flight on 10 ready.
    const ramp = steady((ago) => (ago < 30 ? 59 : 19), 60, NOW);
    const decision = decideScale(SETTINGS, ramp, NOW, 10, { panicSince: NOW - 60_000, panicPeak: 10 });
    expect(decision.panicking).toBe(false);
    expect(Math.ceil(decision.stableConcurrency / SETTINGS.target)).toBe(8);
    expect(decision.desired).toBe(10);
    // Once the last seconds calm down too, it scales in as the stable window says (33.6 in flight: 7).
    const calmer = steady((ago) => (ago < 6 ? 5 : ago < 30 ? 59 : 19), 60, NOW);
    expect(decideScale(SETTINGS, calmer, NOW, 10, INITIAL_SCALE_STATE).desired).toBe(7);
  });

  it('the panic window alone never scales out without a panic', () => {
    // 14 in flight in the last 6 s on 2 ready (below twice their capacity): the stable answer stands.
    const decision = decideScale(
      SETTINGS,
      steady((ago) => (ago < 6 ? 14 : 10), 60, NOW),
      NOW,
      2,
      INITIAL_SCALE_STATE,
    );
    expect(decision).toMatchObject({ desired: 3, panicking: false });
  });

  const settings = fc
    .record({
      min: fc.integer({ min: 0, max: 10 }),
      span: fc.integer({ min: 0, max: 50 }),
      target: fc.integer({ min: 1, max: 100 }),
      stableSec: fc.integer({ min: 6, max: 600 }),
    })
    .map(
      ({ min, span, target, stableSec }): ScaleSettings => ({
        ...SETTINGS,
        min,
        max: Math.max(min + span, 1),
        target,
        stableWindowMs: stableSec * 1000,
        panicWindowMs: stableSec * 100,
      }),
    );
  const samples = fc.array(fc.integer({ min: 0, max: 2000 }), { minLength: 0, maxLength: 120 });
  const state = fc.oneof(
    fc.constant<ScaleState>(INITIAL_SCALE_STATE),
    fc.record({
      panicSince: fc.integer({ min: NOW - 700_000, max: NOW }),
      panicPeak: fc.integer({ min: 0, max: 60 }),
    }),
  );
  const toSamples = (values: number[]) =>
    values.map((concurrency, i) => ({ at: NOW - i * 1000, concurrency }));

  it('always decides within [min, max]', () => {
    fc.assert(
      fc.property(settings, samples, fc.integer({ min: 0, max: 60 }), state, (s, values, ready, st) => {
        const { desired } = decideScale(s, toSamples(values), NOW, ready, st);
        return desired >= s.min && desired <= s.max && Number.isInteger(desired);
      }),
    );
  });

  it('never asks for fewer instances when every sample is higher', () => {
    fc.assert(
      fc.property(
        settings,
        samples,
        fc.integer({ min: 0, max: 500 }),
        fc.integer({ min: 0, max: 60 }),
        state,
        (s, values, extra, ready, st) => {
          const low = decideScale(s, toSamples(values), NOW, ready, st).desired;
          const high = decideScale(s, toSamples(values.map((v) => v + extra)), NOW, ready, st).desired;
          return high >= low;
        },
      ),
    );
  });

  it('a load held for a whole stable window without panic gives ceil(load / target), clamped', () => {
    fc.assert(
      fc.property(settings, fc.integer({ min: 0, max: 2000 }), (s, load) => {
        const want = Math.ceil(load / s.target);
        const clamped = Math.min(Math.max(want, s.min), s.max);
        const ready = Math.max(clamped, 1);
        const seconds = s.stableWindowMs / 1000;
        const decision = decideScale(
          s,
          steady(() => load, seconds, NOW),
          NOW,
          ready,
          INITIAL_SCALE_STATE,
        );
        // Ready instances already at the answer: no panic (the load is within their capacity) and no
        // rate limit applies.
        return decision.desired === clamped && (decision.panicking === false || want >= ready * 2);
      }),
    );
  });

  it('samples outside the stable window count for nothing', () => {
    fc.assert(
      fc.property(settings, samples, fc.integer({ min: 0, max: 60 }), (s, values, ready) => {
        const old = values.map((concurrency, i) => ({ at: NOW - s.stableWindowMs - i * 1000, concurrency }));
        return (
          decideScale(s, old, NOW, ready, INITIAL_SCALE_STATE).desired ===
          decideScale(s, [], NOW, ready, INITIAL_SCALE_STATE).desired
        );
      }),
    );
  });
});
