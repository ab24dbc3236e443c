/**
 * LeastInFlight, the per-request choice of a function's instance on both `/fn/` paths: by fast-check
 * over random picks, ends and endpoint changes, every pick is a listed endpoint with the fewest
 * requests in flight, and counts follow picks and ends exactly (removed endpoints included); requests
 * that never end spread evenly; equals are taken in turn; and EndpointPickers keeps a function's
 * counts across a new endpoint list.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EndpointPickers, LeastInFlight } from './least-in-flight.js';

const ORIGINS = ['http://a', 'http://b', 'http://c', 'http://d', 'http://e'];

type Step = { op: 'pick' } | { op: 'end'; which: number } | { op: 'list'; keep: boolean[] };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ op: 'pick' as const }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('end' as const), which: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('list' as const),
      keep: fc.array(fc.boolean(), { minLength: ORIGINS.length, maxLength: ORIGINS.length }),
    }),
  },
);

describe('LeastInFlight', () => {
  it('picks a listed endpoint with the fewest in flight, and counts exactly, whatever happens', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        let list: string[] = ORIGINS.slice(0, 3);
        const picker = new LeastInFlight(list);
        const inFlight: string[] = [];
        for (const s of steps) {
          if (s.op === 'pick') {
            const picked = picker.acquire();
            if (list.length === 0) {
              expect(picked).toBeUndefined();
              continue;
            }
            expect(list).toContain(picked);
            const fewest = Math.min(...list.map((o) => inFlight.filter((x) => x === o).length));
            expect(inFlight.filter((x) => x === picked).length).toBe(fewest);
            inFlight.push(picked as string);
          } else if (s.op === 'end') {
            if (inFlight.length === 0) continue;
            const [ended] = inFlight.splice(s.which % inFlight.length, 1);
            picker.release(ended as string);
          } else {
            list = ORIGINS.filter((_, i) => s.keep[i]);
            picker.update(list);
          }
          for (const origin of ORIGINS)
            expect(picker.inFlightOf(origin)).toBe(inFlight.filter((x) => x === origin).length);
        }
      }),
    );
  });

  it('spreads requests that are all in flight at once evenly: N/k each, give or take one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 60 }), (k, n) => {
        const list = ORIGINS.slice(0, k);
        const picker = new LeastInFlight(list);
        for (let i = 0; i < n; i++) picker.acquire();
        for (const origin of list) {
          expect(picker.inFlightOf(origin)).toBeGreaterThanOrEqual(Math.floor(n / k));
          expect(picker.inFlightOf(origin)).toBeLessThanOrEqual(Math.ceil(n / k));
        }
      }),
    );
  });

  it('takes equals in turn: requests that end at once go round the endpoints', () => {
    const picker = new LeastInFlight(['http://a', 'http://b', 'http://c']);
    const picked: string[] = [];
    for (let i = 0; i < 7; i++) {
      const origin = picker.acquire() as string;
      picked.push(origin);
      picker.release(origin);
    }
    expect(picked).toEqual([
      'http://a',
      'http://b',
      'http://c',
      'http://a',
      'http://b',
      'http://c',
      'http://a',
    ]);
  });

  it('prefers the idle endpoint over a busier one that comes first in turn', () => {
    const picker = new LeastInFlight(['http://a', 'http://b']);
    const a = picker.acquire();
    const b = picker.acquire();
    expect([a, b]).toEqual(['http://a', 'http://b']);
    picker.release('http://b');
    // The turn is a's, but a has one in flight and b none.
    expect(picker.acquire()).toBe('http://b');
  });

  it('never picks an endpoint once it is no longer listed, and forgets it once its requests end', () => {
    const picker = new LeastInFlight(['http://a', 'http://b']);
    expect(picker.acquire()).toBe('http://a');
    picker.update(['http://b']);
    for (let i = 0; i < 3; i++) expect(picker.acquire()).toBe('http://b');
    expect(picker.inFlightOf('http://a')).toBe(1);
    picker.release('http://a');
    expect(picker.inFlightOf('http://a')).toBe(0);
    picker.update([]);
    expect(picker.acquire()).toBeUndefined();
  });
});

describe('EndpointPickers', () => {
  it("keeps a function's counts across a new endpoint list, and starts over once dropped", () => {
    const pickers = new EndpointPickers();
    const first = pickers.of('ns/fn', ['http://a', 'http://b']);
    first.acquire();
    const again = pickers.of('ns/fn', ['http://a', 'http://b', 'http://c']);
    expect(again).toBe(first);
    expect(again.inFlightOf('http://a')).toBe(1);
    // a is busy: the next two go to b and c.
    expect([again.acquire(), again.acquire()].sort()).toEqual(['http://b', 'http://c']);
    pickers.drop('ns/fn');
    expect(pickers.get('ns/fn')).toBeUndefined();
    expect(pickers.of('ns/fn', ['http://a']).inFlightOf('http://a')).toBe(0);
  });
});
