/**
 * statusMergePatch: undefined fields and nested keys the new status lacks become nulls, so a merge patch
 * replaces a field instead of merging into it; with no previous status the values go as they are.
 */
import { describe, expect, it } from 'vitest';
import { statusMergePatch } from './status-patch.js';

describe('statusMergePatch', () => {
  it('clears undefined fields and nested keys the new value lacks, so a field is replaced, not merged', () => {
    const previous = {
      phase: 'Failed',
      lastBuild: { result: 'Failed', message: 'boom', logTail: 'x' },
      lastError: 'e',
    };
    const patch = statusMergePatch(previous, {
      phase: 'Ready',
      lastBuild: { result: 'Succeeded' },
      lastError: undefined,
      conditions: [{ type: 'Ready' }],
    });
    expect(patch).toEqual({
      phase: 'Ready',
      lastBuild: { result: 'Succeeded', message: null, logTail: null },
      lastError: null,
      conditions: [{ type: 'Ready' }],
    });
  });

  it('sends plain values when there was no status yet', () => {
    expect(statusMergePatch(undefined, { phase: 'Pending', result: { a: 1 } })).toEqual({
      phase: 'Pending',
      result: { a: 1 },
    });
  });
});
