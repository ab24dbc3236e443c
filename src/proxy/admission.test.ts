/**
 * AdmissionGate, a function's concurrency limit and queue: by fast-check over random arrivals, ends,
 * departures and limit changes, it never admits past the limit, serves the queue in order, turns away
 * only when the queue is full and lets nobody wait while a slot is free; a waiter that left is never
 * admitted; and admissionLimits derives the limit and queue from the spec.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdmissionGate, admissionLimits, DEFAULT_QUEUE_FACTOR } from './admission.js';

type Step =
  | { op: 'arrive' }
  | { op: 'end'; pick: number }
  | { op: 'leave'; pick: number }
  | { op: 'limit'; limit: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ op: 'arrive' as const }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('end' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('leave' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('limit' as const), limit: fc.integer({ min: 1, max: 5 }) }),
  },
);

describe('AdmissionGate', () => {
  it('never admits beyond the limit, serves the queue in order and turns away only a full queue', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 5 }),
        fc.array(step, { maxLength: 200 }),
        (startLimit, queue, steps) => {
          let limit = startLimit;
          const gate = new AdmissionGate({ limit, queue });
          const inFlight: number[] = [];
          const waiting: Array<{ id: number; leave: () => void }> = [];
          const admittedFromQueue: number[] = [];
          const expectedFromQueue: number[] = [];
          let next = 0;
          // A waiter admitted when a slot frees: the next one still waiting, and only below the limit.
          const onAdmit = (id: number) => () => {
            expect(inFlight.length).toBeLessThan(limit);
            const head = waiting.shift();
            expect(head?.id).toBe(id);
            inFlight.push(id);
            admittedFromQueue.push(id);
          };
          for (const s of steps) {
            if (s.op === 'arrive') {
              const id = next++;
              const wasFull = waiting.length >= queue;
              const couldStart = waiting.length === 0 && inFlight.length < limit;
              const result = gate.request(onAdmit(id));
              if (couldStart) {
                expect(result.outcome).toBe('admitted');
                inFlight.push(id);
              } else if (wasFull) {
                expect(result.outcome).toBe('rejected');
              } else {
                expect(result.outcome).toBe('queued');
                if (result.outcome === 'queued') waiting.push({ id, leave: result.leave });
              }
            } else if (s.op === 'end' && inFlight.length > 0) {
              inFlight.splice(s.pick % inFlight.length, 1);
              const before = [...waiting];
              gate.done();
              // Whoever was admitted came from the front of the queue, in order.
              expectedFromQueue.push(...before.slice(0, before.length - waiting.length).map((w) => w.id));
            } else if (s.op === 'leave' && waiting.length > 0) {
              const [gone] = waiting.splice(s.pick % waiting.length, 1);
              gone?.leave();
            } else if (s.op === 'limit') {
              limit = s.limit;
              const before = [...waiting];
              gate.update({ limit, queue });
              expectedFromQueue.push(...before.slice(0, before.length - waiting.length).map((w) => w.id));
            }
            expect(gate.active).toBe(inFlight.length);
            expect(gate.queued).toBe(waiting.length);
            expect(gate.queued).toBeLessThanOrEqual(queue);
            // Nobody waits while a slot is free.
            if (waiting.length > 0) expect(inFlight.length).toBeGreaterThanOrEqual(limit);
          }
          expect(admittedFromQueue).toEqual(expectedFromQueue);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a waiter that left is never admitted', () => {
    const gate = new AdmissionGate({ limit: 1, queue: 2 });
    const admitted: string[] = [];
    expect(gate.request(() => admitted.push('a')).outcome).toBe('admitted');
    const b = gate.request(() => admitted.push('b'));
    gate.request(() => admitted.push('c'));
    if (b.outcome !== 'queued') throw new Error('b should wait');
    b.leave();
    gate.done();
    expect(admitted).toEqual(['c']);
    expect(gate.idle).toBe(false);
    gate.done();
    expect(gate.idle).toBe(true);
  });
});

describe('admissionLimits', () => {
  it('is no limit without concurrency, and concurrency × instances with a default queue otherwise', () => {
    expect(admissionLimits(undefined, 3)).toBeUndefined();
    expect(admissionLimits({ queue: 4 }, 3)).toBeUndefined();
    expect(admissionLimits({ concurrency: 2 }, 3)).toEqual({ limit: 6, queue: 6 * DEFAULT_QUEUE_FACTOR });
    expect(admissionLimits({ concurrency: 2, queue: 0 }, 0)).toEqual({ limit: 2, queue: 0 });
  });
});
