/** `Prefer: respond-async` found in a header value, and in raw header lines of any name case, on any line. */
import { describe, expect, it } from 'vitest';
import { prefersAsync, rawPrefersAsync } from './prefer.js';

describe('Prefer: respond-async', () => {
  it.each([
    ['respond-async', true],
    ['Respond-Async', true],
    ['return=minimal, respond-async', true],
    ['respond-async; foo=bar', true],
    ['respond-async, wait=10', true],
    ['wait=10', false],
    ['respond-asynchronously', false],
    ['', false],
  ])('%j: %s', (value, expected) => {
    expect(prefersAsync(value)).toBe(expected);
  });

  it('is read from raw header lines, whatever the name case, on any of several lines', () => {
    expect(rawPrefersAsync(['Host', 'x', 'PREFER', 'wait=1', 'prefer', 'respond-async'])).toBe(true);
    expect(rawPrefersAsync(['Host', 'x', 'x-prefer', 'respond-async'])).toBe(false);
    expect(rawPrefersAsync([])).toBe(false);
  });
});
