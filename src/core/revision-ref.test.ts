/**
 * The `name@ref` segment of a function URL: a name, a full or 12-digit commit, or a label, and anything
 * else refused; a short commit matching as a prefix, and commit URLs shown with 12 digits.
 */
import { describe, expect, it } from 'vitest';
import { commitMatches, commitPath, parseFunctionSegment } from './revision-ref.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';

describe('parseFunctionSegment', () => {
  it('takes a plain name, a full or 12-digit commit, and a label', () => {
    expect(parseFunctionSegment('hello')).toEqual({ name: 'hello' });
    expect(parseFunctionSegment(`hello@${SHA}`)).toEqual({
      name: 'hello',
      ref: { kind: 'commit', commit: SHA },
    });
    expect(parseFunctionSegment(`hello@${SHA.slice(0, 12)}`)).toEqual({
      name: 'hello',
      ref: { kind: 'commit', commit: SHA.slice(0, 12) },
    });
    expect(parseFunctionSegment('hello@feature-x')).toEqual({
      name: 'hello',
      ref: { kind: 'label', label: 'feature-x' },
    });
  });

  it('refuses what is neither', () => {
    for (const bad of [
      '',
      'Hello',
      'hello@',
      '@abc',
      'hello@x@y',
      `hello@${SHA.toUpperCase()}`,
      'hello@-x',
      'a'.repeat(64),
    ])
      expect(parseFunctionSegment(bad)).toBeUndefined();
  });
});

describe('commit helpers', () => {
  it('match a full SHA exactly and a short one as a prefix', () => {
    expect(commitMatches(SHA, SHA)).toBe(true);
    expect(commitMatches(SHA, SHA.slice(0, 12))).toBe(true);
    expect(commitMatches(SHA, `${SHA.slice(0, 39)}8`)).toBe(false);
    expect(commitMatches(SHA, 'fedcba987654')).toBe(false);
  });

  it('show a commit URL with 12 digits', () => {
    expect(commitPath('http://h/fn/default/f', SHA)).toBe('http://h/fn/default/f@0123456789ab');
  });
});
