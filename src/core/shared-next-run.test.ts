/**
 * SharedNextRun: callers during a run share exactly one next run, which starts after the current one
 * ends; keys never share; an error reaches the callers of its run only.
 */
import { describe, expect, it } from 'vitest';
import { SharedNextRun } from './shared-next-run.js';

/** A task whose runs are recorded and ended by the test, one at a time. */
function gatedTask() {
  const runs: { key: string; started: number; end: (error?: Error) => void }[] = [];
  let clock = 0;
  const task = (key: string) => () =>
    new Promise<void>((resolve, reject) => {
      runs.push({ key, started: clock++, end: (error) => (error ? reject(error) : resolve()) });
    });
  return { runs, task };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('SharedNextRun', () => {
  it('20 callers during a run share one next run, which starts only after the first ends', async () => {
    const shared = new SharedNextRun<string>();
    const { runs, task } = gatedTask();
    const first = shared.run('ns', task('ns'));
    await tick();
    expect(runs).toHaveLength(1);
    const later = Array.from({ length: 20 }, () => shared.run('ns', task('ns')));
    expect(new Set(later).size).toBe(1);
    await tick();
    // Nothing starts while the first run is under way.
    expect(runs).toHaveLength(1);
    runs[0]?.end();
    await first;
    await tick();
    expect(runs).toHaveLength(2);
    let settled = false;
    void later[0]?.then(() => {
      settled = true;
    });
    await tick();
    expect(settled).toBe(false);
    runs[1]?.end();
    await Promise.all(later);
    // And nothing else ran.
    expect(runs).toHaveLength(2);
  });

  it('a caller after the shared run started waits for a run of its own', async () => {
    const shared = new SharedNextRun<string>();
    const { runs, task } = gatedTask();
    void shared.run('ns', task('ns'));
    const second = shared.run('ns', task('ns'));
    await tick();
    runs[0]?.end();
    await tick();
    expect(runs).toHaveLength(2);
    // The second run is under way: a new caller must not be handed it.
    const third = shared.run('ns', task('ns'));
    expect(third).not.toBe(second);
    runs[1]?.end();
    await second;
    await tick();
    expect(runs).toHaveLength(3);
    runs[2]?.end();
    await third;
  });

  it('keys run apart, at the same time', async () => {
    const shared = new SharedNextRun<string>();
    const { runs, task } = gatedTask();
    const a = shared.run('a', task('a'));
    const b = shared.run('b', task('b'));
    await tick();
    expect(runs.map((run) => run.key)).toEqual(['a', 'b']);
    for (const run of runs) run.end();
    await Promise.all([a, b]);
  });

  it('a failed run rejects its own callers, and the queued run still runs and answers its callers', async () => {
    const shared = new SharedNextRun<string>();
    const { runs, task } = gatedTask();
    const first = shared.run('ns', task('ns'));
    const queued = shared.run('ns', task('ns'));
    await tick();
    runs[0]?.end(new Error('forbidden'));
    await expect(first).rejects.toThrow('forbidden');
    await tick();
    expect(runs).toHaveLength(2);
    runs[1]?.end();
    await expect(queued).resolves.toBeUndefined();
  });

  it('a task that throws at once rejects instead of throwing from run()', async () => {
    const shared = new SharedNextRun<string>();
    const outcome = shared.run('ns', () => {
      throw new Error('bad');
    });
    await expect(outcome).rejects.toThrow('bad');
    // The key is free again.
    await expect(shared.run('ns', async () => undefined)).resolves.toBeUndefined();
  });
});
