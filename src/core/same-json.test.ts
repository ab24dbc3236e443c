// sameJson, which a sync's unchanged-object check uses, must agree with the stable JSON texts it
// replaced, or a sync would write unchanged objects (or, worse, skip changed ones).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sameJson, stableStringify } from './hash.js';

/** Manifest-like values: plain objects, arrays, strings, numbers, booleans, null, and undefined fields. */
const value = fc.letrec((tie) => ({
  leaf: fc.oneof(
    fc.string({ maxLength: 3 }),
    fc.integer({ min: -2, max: 2 }),
    fc.boolean(),
    fc.constant(null),
  ),
  object: fc.dictionary(
    fc.constantFrom('a', 'b', 'c'),
    fc.oneof(tie('leaf'), tie('node'), fc.constant(undefined)),
    { maxKeys: 3 },
  ),
  array: fc.array(tie('node'), { maxLength: 3 }),
  node: fc.oneof({ depthSize: 'small' }, tie('leaf'), tie('object'), tie('array')),
}));

describe('sameJson', () => {
  it('says what comparing stable JSON texts says', () => {
    fc.assert(
      fc.property(value.node, value.node, (a, b) => {
        expect(sameJson(a, b)).toBe(stableStringify(a) === stableStringify(b));
        expect(sameJson(a, structuredClone(a))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('golden cases: an undefined field is no field; key order does not count; array order does', () => {
    expect(sameJson({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(true);
    expect(sameJson({ a: { x: [1, 2] } }, { a: { x: [2, 1] } })).toBe(false);
    expect(sameJson({ a: 1 }, { a: '1' })).toBe(false);
    expect(sameJson({ a: null }, {})).toBe(false);
    expect(sameJson([], {})).toBe(false);
  });
});
