/** Stable JSON (keys sorted at every level, undefined dropped) and golden SHA-256 digests of those bytes. */
import { describe, expect, it } from 'vitest';
import { hashObject, sha256Hex, sortKeysDeep, stableStringify } from './hash.js';

describe('stable hashing', () => {
  it('sorts keys at every level, keeps array order, keeps null and drops undefined', () => {
    expect(stableStringify({ b: [{ d: 1, c: 'x' }, 's'], a: null, u: undefined })).toBe(
      '{"a":null,"b":[{"c":"x","d":1},"s"]}',
    );
    expect(sortKeysDeep({ z: undefined, y: { x: undefined, w: 1 } })).toStrictEqual({ y: { w: 1 } });
    expect(stableStringify('text')).toBe('"text"');
    expect(stableStringify([3, 1, 2])).toBe('[3,1,2]');
  });

  it('golden digests (sha256sum of the same bytes)', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hashObject({ b: 1, a: 'x' })).toBe(sha256Hex('{"a":"x","b":1}'));
    expect(sha256Hex('{"a":"x","b":1}')).toBe(
      'cdab067e9f3beb32d1252cfd63e492592fecbf591b0d08cadb24bb17f3864246',
    );
  });
});
