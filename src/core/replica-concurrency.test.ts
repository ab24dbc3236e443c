/**
 * ReplicaConcurrency, table by table: each case is a timeline of reports arriving and of the leader
 * asking for its decision input, with the sums it must get (golden values): replicas that come and
 * go, reports that go stale, duplicates and reports out of order, and a function that no longer
 * autoscales.
 */
import { describe, expect, it } from 'vitest';
import { type RecordOutcome, ReplicaConcurrency } from './replica-concurrency.js';

/** Three report intervals of 1 s. */
const FRESH_MS = 3000;
const A = 'ns/a';
const B = 'ns/b';

type Step =
  | { at: number; from: string; sentAt?: number; report: Record<string, number>; outcome?: RecordOutcome }
  | { at: number; ask?: string[]; totals: Record<string, number>; replicas?: string[] };

function play(steps: Step[]): void {
  const peers = new ReplicaConcurrency(FRESH_MS);
  for (const [index, step] of steps.entries()) {
    if ('from' in step) {
      const outcome = peers.record(
        { replica: step.from, sentAt: step.sentAt ?? step.at, concurrency: step.report },
        step.at,
      );
      expect(outcome, `step ${index}: record`).toBe(step.outcome ?? 'applied');
    } else {
      const totals = Object.fromEntries(peers.totals(step.at, step.ask ?? [A, B]));
      expect(totals, `step ${index}: totals at ${step.at}`).toEqual(step.totals);
      if (step.replicas) expect(peers.replicas(step.at), `step ${index}: replicas`).toEqual(step.replicas);
    }
  }
}

describe('ReplicaConcurrency', () => {
  it.each<[string, Step[]]>([
    [
      'no replica reported: every function asked for is 0',
      [{ at: 0, totals: { [A]: 0, [B]: 0 }, replicas: [] }],
    ],
    [
      'two replicas: their latest reports sum per function',
      [
        { at: 0, from: 'r1', report: { [A]: 2.5 } },
        { at: 10, from: 'r2', report: { [A]: 1.25, [B]: 4 } },
        { at: 20, totals: { [A]: 3.75, [B]: 4 }, replicas: ['r1', 'r2'] },
      ],
    ],
    [
      'a newer report replaces the replica’s last one whole: a function it leaves out had none',
      [
        { at: 0, from: 'r1', report: { [A]: 3, [B]: 1 } },
        { at: 1000, from: 'r1', report: { [B]: 2 } },
        { at: 1001, totals: { [A]: 0, [B]: 2 } },
      ],
    ],
    [
      'a report counts for under three intervals after it arrived, then the replica stops counting',
      [
        { at: 0, from: 'r1', report: { [A]: 5 } },
        { at: 1000, from: 'r2', report: { [A]: 1 } },
        { at: 2999, totals: { [A]: 6, [B]: 0 }, replicas: ['r1', 'r2'] },
        { at: 3000, totals: { [A]: 1, [B]: 0 }, replicas: ['r2'] },
        { at: 4000, totals: { [A]: 0, [B]: 0 }, replicas: [] },
      ],
    ],
    [
      'a replica that died and came back (a restart keeps the name) counts again from its next report',
      [
        { at: 0, from: 'r1', report: { [A]: 4 } },
        { at: 5000, totals: { [A]: 0, [B]: 0 }, replicas: [] },
        { at: 6000, from: 'r1', report: { [A]: 2 } },
        { at: 6500, totals: { [A]: 2, [B]: 0 }, replicas: ['r1'] },
      ],
    ],
    [
      'a new replica joins while another leaves',
      [
        { at: 0, from: 'r1', report: { [A]: 1 } },
        { at: 1000, from: 'r1', report: { [A]: 1 } },
        { at: 2000, from: 'r2', report: { [A]: 7 } },
        { at: 2500, totals: { [A]: 8, [B]: 0 }, replicas: ['r1', 'r2'] },
        { at: 4500, totals: { [A]: 7, [B]: 0 }, replicas: ['r2'] },
      ],
    ],
    [
      'the same report twice is applied once; its second arrival does not make it fresh again',
      [
        { at: 0, from: 'r1', sentAt: 100, report: { [A]: 3 } },
        { at: 2000, from: 'r1', sentAt: 100, report: { [A]: 3 }, outcome: 'superseded' },
        { at: 3000, totals: { [A]: 0, [B]: 0 }, replicas: [] },
      ],
    ],
    [
      'an older report arriving after a newer one is dropped',
      [
        { at: 0, from: 'r1', sentAt: 2000, report: { [A]: 6 } },
        { at: 10, from: 'r1', sentAt: 1000, report: { [A]: 1 }, outcome: 'superseded' },
        { at: 20, totals: { [A]: 6, [B]: 0 } },
      ],
    ],
    [
      'ordering is per replica: another replica’s older clock is not out of order',
      [
        { at: 0, from: 'r1', sentAt: 9000, report: { [A]: 1 } },
        { at: 10, from: 'r2', sentAt: 10, report: { [A]: 2 } },
        { at: 20, totals: { [A]: 3, [B]: 0 } },
      ],
    ],
    [
      'once the held report went stale, a report with an earlier clock counts (its clock stepped back)',
      [
        { at: 0, from: 'r1', sentAt: 50_000, report: { [A]: 1 } },
        { at: 3000, from: 'r1', sentAt: 40_000, report: { [A]: 2 } },
        { at: 3001, totals: { [A]: 2, [B]: 0 } },
      ],
    ],
    [
      'a function a report names that no longer autoscales adds to nothing',
      [
        { at: 0, from: 'r1', report: { [A]: 2, 'ns/gone': 9 } },
        { at: 1, ask: [A], totals: { [A]: 2 } },
        { at: 2, ask: [A, B], totals: { [A]: 2, [B]: 0 } },
      ],
    ],
    [
      'fractional averages sum exactly as reported',
      [
        { at: 0, from: 'r1', report: { [A]: 0.5 } },
        { at: 0, from: 'r2', report: { [A]: 0.25 } },
        { at: 0, from: 'r3', report: { [A]: 0.125 } },
        { at: 1, totals: { [A]: 0.875, [B]: 0 }, replicas: ['r1', 'r2', 'r3'] },
      ],
    ],
  ])('%s', (_what, steps) => play(steps));

  it('clear forgets every replica (a new term starts from its own counts)', () => {
    const peers = new ReplicaConcurrency(FRESH_MS);
    peers.record({ replica: 'r1', sentAt: 1, concurrency: { [A]: 3 } }, 0);
    peers.clear();
    expect(Object.fromEntries(peers.totals(1, [A]))).toEqual({ [A]: 0 });
    expect(peers.replicas(1)).toEqual([]);
    // Nothing held blocks the replica's next report, whatever its clock says.
    expect(peers.record({ replica: 'r1', sentAt: 1, concurrency: { [A]: 1 } }, 2)).toBe('applied');
  });
});
