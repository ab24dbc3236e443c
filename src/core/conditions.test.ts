/**
 * Status conditions: lastTransitionTime moves only when the status does, a condition replaces one of
 * its type while the others stay sorted by type, the input list is never modified, and the time defaults
 * to now.
 */
import { describe, expect, it } from 'vitest';
import { type Condition, getCondition, setCondition } from './conditions.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const t1 = new Date('2026-01-01T00:05:00.000Z');

describe('status conditions', () => {
  it('keep lastTransitionTime while the status stays, and move it when the status changes', () => {
    const ready = {
      type: 'Ready',
      status: 'False',
      reason: 'Building',
      message: 'm',
      observedGeneration: 1,
    } as const;
    const first = setCondition(undefined, ready, t0);
    expect(first).toEqual([{ ...ready, lastTransitionTime: '2026-01-01T00:00:00.000Z' }]);
    // Same status, new reason and generation: the transition time stays.
    const same = setCondition(first, { ...ready, reason: 'StillBuilding', observedGeneration: 2 }, t1);
    expect(same).toEqual([
      {
        ...ready,
        reason: 'StillBuilding',
        observedGeneration: 2,
        lastTransitionTime: '2026-01-01T00:00:00.000Z',
      },
    ]);
    const flipped = setCondition(same, { ...ready, status: 'True', reason: 'Ready' }, t1);
    expect(flipped).toEqual([
      { ...ready, status: 'True', reason: 'Ready', lastTransitionTime: '2026-01-01T00:05:00.000Z' },
    ]);
    // The input list is never modified.
    expect(first[0]?.lastTransitionTime).toBe('2026-01-01T00:00:00.000Z');
    expect(same[0]?.reason).toBe('StillBuilding');
  });

  it('replace a condition of the same type, keep the others, and sort by type', () => {
    const base = { status: 'True', reason: 'r', message: '', observedGeneration: 1 } as const;
    let list: Condition[] = [];
    list = setCondition(list, { ...base, type: 'Stalled' }, t0);
    list = setCondition(list, { ...base, type: 'Ready' }, t0);
    list = setCondition(list, { ...base, type: 'Reconciling' }, t0);
    list = setCondition(list, { ...base, type: 'Ready', status: 'False' }, t1);
    expect(list.map((c) => `${c.type}=${c.status}@${c.lastTransitionTime.slice(11, 16)}`)).toEqual([
      'Ready=False@00:05',
      'Reconciling=True@00:00',
      'Stalled=True@00:00',
    ]);
    expect(getCondition(list, 'Reconciling')?.status).toBe('True');
    expect(getCondition(list, 'Ready')?.status).toBe('False');
    expect(getCondition(undefined, 'Ready')).toBeUndefined();
    expect(getCondition([], 'Ready')).toBeUndefined();
  });

  it('stamp the current time when none is given', () => {
    const before = Date.now();
    const [c] = setCondition(undefined, {
      type: 'Ready',
      status: 'Unknown',
      reason: 'r',
      message: '',
      observedGeneration: 0,
    });
    const stamped = Date.parse(c?.lastTransitionTime ?? '');
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stamped).toBeLessThanOrEqual(Date.now());
  });
});
