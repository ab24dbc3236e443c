/** BoundedCache: a held key is replaced, a new key past the limit starts it over; it never grows past it. */
import { describe, expect, it } from 'vitest';
import { BoundedCache } from './bounded-cache.js';

describe('BoundedCache', () => {
  it('starts over when a new key would pass the limit, and never holds more than the limit', () => {
    const cache = new BoundedCache<string, number>(3);
    for (const [i, key] of ['a', 'b', 'c'].entries()) cache.set(key, i);
    expect([cache.get('a'), cache.get('b'), cache.get('c'), cache.size]).toEqual([0, 1, 2, 3]);
    cache.set('b', 10); // a key it holds: replaced, nothing forgotten
    expect([cache.get('a'), cache.get('b'), cache.size]).toEqual([0, 10, 3]);
    cache.set('d', 3);
    expect([cache.get('a'), cache.get('b'), cache.get('c'), cache.get('d'), cache.size]).toEqual([
      undefined,
      undefined,
      undefined,
      3,
      1,
    ]);
    for (let i = 0; i < 1000; i++) {
      cache.set(`k${i}`, i);
      expect(cache.size).toBeLessThanOrEqual(3);
    }
  });
});
