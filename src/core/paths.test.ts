/**
 * Repository paths: normalizeRepoPath refuses anything that climbs out (also by fast-check over any
 * input), isWithin does not take a prefix-sibling for a child, and symlink targets resolve relative to
 * the link and never outside the tree.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isWithin, normalizeRepoPath, resolveLinkTarget } from './paths.js';

describe('repository paths', () => {
  it.each([
    ['.', ''],
    ['./functions/a/', 'functions/a'],
    ['functions/../b', 'b'],
    ['..', undefined],
    ['../x', undefined],
    ['a/../../x', undefined],
    ['/etc', undefined],
    ['a\\..\\..\\x', undefined],
  ])('normalizeRepoPath(%j) = %j', (input, expected) => {
    expect(normalizeRepoPath(input)).toBe(expected);
  });

  it('isWithin: the root holds everything; a directory holds itself and what is below, not its prefix-siblings', () => {
    expect(isWithin('', 'fns/a')).toBe(true);
    expect(isWithin('', '')).toBe(true);
    expect(isWithin('fns/a', 'fns/a')).toBe(true);
    expect(isWithin('fns/a', 'fns/a/x.js')).toBe(true);
    expect(isWithin('fns/a', 'fns/ab/x.js')).toBe(false);
    expect(isWithin('fns/a', 'fns')).toBe(false);
  });

  it('never returns a path that climbs out, whatever the input', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('..', '.', 'a', 'b', '', '...'), { maxLength: 8 }), (parts) => {
        const result = normalizeRepoPath(parts.join('/'));
        if (result !== undefined) {
          expect(result.split('/')).not.toContain('..');
          expect(result.startsWith('/')).toBe(false);
        }
      }),
    );
  });

  it('resolves symlink targets relative to the link', () => {
    expect(resolveLinkTarget('fn/a/link', '../b/file')).toBe('fn/b/file');
    expect(resolveLinkTarget('fn/link', '../../etc/passwd')).toBeUndefined();
    expect(resolveLinkTarget('fn/link', '/etc/passwd')).toBeUndefined();
    expect(isWithin('fn', 'fn/x')).toBe(true);
    expect(isWithin('fn', 'fnx/y')).toBe(false);
  });
});
