/**
 * LeaderTasks across leadership terms: tasks start in order and stop newest first, a stop asked for
 * during a start waits for it and stops what it started, and a task that fails to start leaves the others
 * running.
 */
import { describe, expect, it } from 'vitest';
import { LeaderTasks } from './leadership.js';

describe('LeaderTasks', () => {
  it('starts tasks in order, stops them newest first, and starts again in the next term', async () => {
    const calls: string[] = [];
    const tasks = new LeaderTasks({ onError: (task) => calls.push(`error ${task}`) });
    for (const name of ['loop', 'watch'])
      tasks.register(name, () => {
        calls.push(`start ${name}`);
        return () => {
          calls.push(`stop ${name}`);
        };
      });
    await tasks.startAll();
    await tasks.startAll();
    await tasks.stopAll();
    await tasks.stopAll();
    await tasks.startAll();
    expect(calls).toEqual([
      'start loop',
      'start watch',
      'stop watch',
      'stop loop',
      'start loop',
      'start watch',
    ]);
  });

  it('a stop asked for while a start runs waits for it, then stops what it started', async () => {
    const calls: string[] = [];
    let release: () => void = () => undefined;
    let starting: () => void = () => undefined;
    const isStarting = new Promise<void>((r) => {
      starting = r;
    });
    const tasks = new LeaderTasks({ onError: () => undefined });
    tasks.register('slow', async () => {
      calls.push('starting');
      starting();
      await new Promise<void>((r) => {
        release = r;
      });
      calls.push('started');
      return () => {
        calls.push('stopped');
      };
    });
    const started = tasks.startAll();
    const stopped = tasks.stopAll();
    await isStarting;
    release();
    await Promise.all([started, stopped]);
    expect(calls).toEqual(['starting', 'started', 'stopped']);
  });

  it('a task that fails to start is reported and the others still run', async () => {
    const errors: string[] = [];
    const started: string[] = [];
    const tasks = new LeaderTasks({ onError: (task) => errors.push(task) });
    tasks.register('broken', () => {
      throw new Error('no');
    });
    tasks.register('fine', () => {
      started.push('fine');
      return () => undefined;
    });
    await tasks.startAll();
    expect(errors).toEqual(['broken']);
    expect(started).toEqual(['fine']);
  });
});
