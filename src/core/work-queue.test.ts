import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.js';

describe('WorkQueue', () => {
  it('never runs one key twice at once, and reruns a key added while it ran', async () => {
    let running = 0;
    let maxRunning = 0;
    const runs: string[] = [];
    const queue = new WorkQueue({
      handler: async (key) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        runs.push(key);
        await new Promise((r) => setTimeout(r, 10));
        running--;
      },
      onError: () => undefined,
    });
    for (let i = 0; i < 50; i++) queue.add('a');
    await new Promise((r) => setTimeout(r, 2));
    queue.add('a');
    queue.add('b');
    await queue.idle();
    expect(maxRunning).toBeLessThanOrEqual(2);
    expect(runs.filter((k) => k === 'a')).toHaveLength(2);
    expect(runs.filter((k) => k === 'b')).toHaveLength(1);
  });

  it('reports handler errors and keeps going', async () => {
    const errors: string[] = [];
    const queue = new WorkQueue({
      handler: async (key) => {
        if (key === 'bad') throw new Error('boom');
      },
      onError: (key, error) => errors.push(`${key}:${(error as Error).message}`),
    });
    queue.add('bad');
    queue.add('good');
    await queue.idle();
    expect(errors).toEqual(['bad:boom']);
  });
});
