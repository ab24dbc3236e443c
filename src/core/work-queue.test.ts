/**
 * WorkQueue's ordering, with a handler the test finishes by hand: one key never runs twice at once and
 * reruns once if added meanwhile, behind keys already waiting; adds coalesce; at most `concurrency` keys
 * run; idle() waits for queued and running work; stop() drops the queue; and a handler error is reported.
 */
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.js';

/** A handler whose runs the test finishes by hand, so overlaps are decided by the test, not timers. */
function controlledHandler() {
  const running = new Map<string, number>();
  const maxPerKey = new Map<string, number>();
  const runs: string[] = [];
  let maxTotal = 0;
  const pending: Array<{ key: string; finish: () => void }> = [];
  const started: Array<() => void> = [];
  const handler = (key: string) =>
    new Promise<void>((resolve) => {
      runs.push(key);
      running.set(key, (running.get(key) ?? 0) + 1);
      maxPerKey.set(key, Math.max(maxPerKey.get(key) ?? 0, running.get(key) ?? 0));
      maxTotal = Math.max(
        maxTotal,
        [...running.values()].reduce((a, b) => a + b, 0),
      );
      pending.push({
        key,
        finish: () => {
          running.set(key, (running.get(key) ?? 1) - 1);
          resolve();
        },
      });
      for (const notify of started.splice(0)) notify();
    });
  return {
    handler,
    runs,
    maxPerKey,
    maxTotal: () => maxTotal,
    running: () => pending.map((p) => p.key),
    /** Finishes the oldest run of `key` and lets the queue react. */
    async finish(key: string) {
      const index = pending.findIndex((p) => p.key === key);
      if (index < 0) throw new Error(`${key} is not running`);
      const [run] = pending.splice(index, 1);
      run?.finish();
      await new Promise((r) => setImmediate(r));
    },
  };
}

describe('WorkQueue', () => {
  it('never runs one key twice at once, even with free workers, and reruns a key added while it ran', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined, concurrency: 4 });
    queue.add('a');
    expect(h.running()).toEqual(['a']);
    // Added while running: must wait, though three workers are free.
    for (let i = 0; i < 10; i++) queue.add('a');
    queue.add('b');
    expect(h.running()).toEqual(['a', 'b']);
    expect(h.maxPerKey.get('a')).toBe(1);
    await h.finish('a');
    // The one rerun of 'a' (ten adds coalesced) starts only now.
    expect(h.running()).toEqual(['b', 'a']);
    await h.finish('a');
    await h.finish('b');
    await queue.idle();
    expect(h.runs).toEqual(['a', 'b', 'a']);
    expect(h.maxPerKey.get('a')).toBe(1);
    expect(h.maxPerKey.get('b')).toBe(1);
    // Different keys did overlap, so the per-key check above could have seen an overlap too.
    expect(h.maxTotal()).toBe(2);
  });

  it('coalesces adds of a queued key and runs at most `concurrency` keys at once, in order', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined, concurrency: 2 });
    for (const key of ['a', 'b', 'c', 'c', 'd', 'c']) queue.add(key);
    expect(h.running()).toEqual(['a', 'b']);
    await h.finish('b');
    expect(h.running()).toEqual(['a', 'c']);
    await h.finish('a');
    expect(h.running()).toEqual(['c', 'd']);
    await h.finish('c');
    await h.finish('d');
    await queue.idle();
    expect(h.runs).toEqual(['a', 'b', 'c', 'd']);
    expect(h.maxTotal()).toBe(2);
  });

  it('puts a key added while it ran behind the keys that were already waiting (no starvation)', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined, concurrency: 1 });
    queue.add('hot');
    queue.add('hot');
    queue.add('cold');
    await h.finish('hot');
    expect(h.running()).toEqual(['cold']);
    await h.finish('cold');
    expect(h.running()).toEqual(['hot']);
    await h.finish('hot');
    await queue.idle();
    expect(h.runs).toEqual(['hot', 'cold', 'hot']);
  });

  it('idle() waits for a running key even when nothing is queued', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined });
    queue.add('a');
    let idle = false;
    const waiting = queue.idle().then(() => {
      idle = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(idle).toBe(false);
    await h.finish('a');
    await waiting;
    expect(idle).toBe(true);
  });

  it('runs four keys at once by default', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined });
    for (const key of ['a', 'b', 'c', 'd', 'e']) queue.add(key);
    expect(h.running()).toEqual(['a', 'b', 'c', 'd']);
    for (const key of ['a', 'b', 'c', 'd']) await h.finish(key);
    expect(h.running()).toEqual(['e']);
    await h.finish('e');
    await queue.idle();
  });

  // `npm run mutate`: in pump() and idle(), `this.queued.length === 0` → true survives and is
  // equivalent for any concurrency ≥ 1 (every caller): with no key running, pump's loop has emptied
  // the queue. Neither line has a disable comment, which would also hide the killed mutants of
  // `this.running === 0` there.
  it('idle() waits for queued and running work, and resolves at once when there is none', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined, concurrency: 1 });
    let idle = false;
    await queue.idle();
    queue.add('a');
    queue.add('b');
    const waiting = queue.idle().then(() => {
      idle = true;
    });
    await h.finish('a');
    expect(idle).toBe(false);
    await h.finish('b');
    await waiting;
    expect(idle).toBe(true);
    expect(h.runs).toEqual(['a', 'b']);
  });

  it('after stop(), drops what is queued and ignores new adds; the running key finishes', async () => {
    const h = controlledHandler();
    const queue = new WorkQueue({ handler: h.handler, onError: () => undefined, concurrency: 1 });
    queue.add('a');
    queue.add('b');
    queue.stop();
    queue.add('c');
    await h.finish('a');
    await queue.idle();
    expect(h.runs).toEqual(['a']);
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
    // A failed key can run again.
    queue.add('bad');
    await queue.idle();
    expect(errors).toEqual(['bad:boom', 'bad:boom']);
  });
});
