/** PollReader rides out a few transient API failures, counting anew after a success; a 403 fails at once. */
import { describe, expect, it } from 'vitest';
import { KubeApiError } from './http.js';
import { PollReader } from './poll.js';

describe('PollReader', () => {
  it('rides out transient failures and resets after a success', async () => {
    const reader = new PollReader({ maxFailures: 3 });
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    expect(await reader.read(() => Promise.reject(reset))).toBe('retry');
    expect(await reader.read(() => Promise.reject(new KubeApiError(503, '', 'unavailable')))).toBe('retry');
    expect(await reader.read(async () => 1)).toEqual({ value: 1 });
    expect(await reader.read(() => Promise.reject(reset))).toBe('retry');
    expect(await reader.read(() => Promise.reject(reset))).toBe('retry');
    await expect(reader.read(() => Promise.reject(reset))).rejects.toThrow('socket hang up');
  });

  it('fails at once on a permanent error (403 Forbidden)', async () => {
    const reader = new PollReader();
    await expect(reader.read(() => Promise.reject(new KubeApiError(403, 'Forbidden', 'no')))).rejects.toThrow(
      'no',
    );
  });
});
