// Retries of the work queue: exponential per-key backoff with a cap and jitter, a shared retry rate,
// and success forgetting failures. Fake timers make the delays exact instead of timed.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WorkQueue } from './work-queue.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function queueWith(
  handler: (key: string) => Promise<void>,
  options: Partial<ConstructorParameters<typeof WorkQueue>[0]> = {},
) {
  const delays: number[] = [];
  const queue = new WorkQueue({
    handler,
    onError: (_key, _error, retryInMs) => delays.push(retryInMs),
    random: () => 0.5,
    ...options,
  });
  return { queue, delays };
}

describe('WorkQueue retries', () => {
  it('backs off exponentially per key up to the cap', () => {
    const { queue } = queueWith(async () => undefined, {
      backoff: { baseMs: 100, maxMs: 1000, jitter: 0.2, burst: 1000 },
    });
    expect([1, 2, 3, 4, 5, 6, 20].map((n) => queue.retryDelay(n))).toEqual([
      100, 200, 400, 800, 1000, 1000, 1000,
    ]);
  });

  it('jitters each delay within ±jitter and never beyond the cap', () => {
    const low = queueWith(async () => undefined, {
      random: () => 0,
      backoff: { baseMs: 100, maxMs: 1000, jitter: 0.2, burst: 1000 },
    }).queue;
    const high = queueWith(async () => undefined, {
      random: () => 0.999999,
      backoff: { baseMs: 100, maxMs: 1000, jitter: 0.2, burst: 1000 },
    }).queue;
    expect([low.retryDelay(1), low.retryDelay(3), low.retryDelay(10)]).toEqual([80, 320, 800]);
    expect([high.retryDelay(1), high.retryDelay(3), high.retryDelay(10)]).toEqual([120, 480, 1000]);
  });

  it('retries a failing key until it succeeds, then forgets its failures', async () => {
    let calls = 0;
    const ran: number[] = [];
    const { queue, delays } = queueWith(
      async () => {
        calls++;
        ran.push(Date.now());
        if (calls <= 3) throw new Error(`transient ${calls}`);
      },
      { backoff: { baseMs: 100, maxMs: 10_000, jitter: 0.2 } },
    );
    queue.add('fn');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toBe(4);
    expect(delays).toEqual([100, 200, 400]);
    expect(ran).toEqual([0, 100, 300, 700]);
    expect(queue.failuresOf('fn')).toBe(0);
    // Nothing else is scheduled once the key succeeded.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toBe(4);
  });

  it('an event for a key waiting to retry runs it at once', async () => {
    let calls = 0;
    const { queue } = queueWith(
      async () => {
        calls++;
        if (calls === 1) throw new Error('transient');
      },
      { backoff: { baseMs: 5000 } },
    );
    queue.add('fn');
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(1);
    queue.add('fn');
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(2);
    // The cancelled retry does not run a third time.
    await vi.advanceTimersByTimeAsync(20_000);
    expect(calls).toBe(2);
  });

  // `npm run mutate`: in rateDelay, `this.tokens >= 0` → `>` survives and is equivalent: at exactly
  // 0 tokens the other branch gives Math.ceil(-0) = -0, and x + -0 = x. It has no disable comment,
  // which would also hide the killed `<` on that line.
  it('shares a retry rate across keys: past the burst, retries queue behind the rate', async () => {
    const { queue, delays } = queueWith(
      async () => {
        throw new Error('api down');
      },
      { backoff: { baseMs: 100, maxMs: 100, jitter: 0, retriesPerSecond: 2, burst: 2 } },
    );
    for (const key of ['a', 'b', 'c', 'd']) queue.add(key);
    await vi.advanceTimersByTimeAsync(1);
    expect(delays).toEqual([100, 100, 600, 1100]);
    queue.stop();
  });

  it('stop cancels pending retries', async () => {
    let calls = 0;
    const { queue } = queueWith(async () => {
      calls++;
      throw new Error('x');
    });
    queue.add('fn');
    await vi.advanceTimersByTimeAsync(1);
    expect(vi.getTimerCount()).toBe(1);
    queue.stop();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toBe(1);
  });
});

describe('WorkQueue retry defaults and the shared rate over time', () => {
  it('defaults: 250 ms doubling, capped at 5 min, ±20 % jitter, bursts of 100 at 10 retries/s', () => {
    const low = new WorkQueue({ handler: async () => undefined, onError: () => undefined, random: () => 0 });
    // 250·2ⁿ⁻¹ scaled by 0.8; 2¹⁰·250 = 256 s is under the cap, 2¹¹·250 is not.
    expect([1, 2, 11, 12, 40].map((n) => low.retryDelay(n))).toEqual([200, 400, 204_800, 240_000, 240_000]);
    const high = new WorkQueue({
      handler: async () => undefined,
      onError: () => undefined,
      random: () => 0.999999,
    });
    expect([1, 12].map((n) => high.retryDelay(n))).toEqual([300, 300_000]);
    // A fresh queue: 100 retries at once are free, the 101st waits 1/10 s for a token, the 102nd 2/10.
    const mid = new WorkQueue({
      handler: async () => undefined,
      onError: () => undefined,
      random: () => 0.5,
    });
    const delays = Array.from({ length: 102 }, () => mid.retryDelay(1));
    expect(delays.slice(0, 100)).toEqual(Array(100).fill(250));
    expect(delays.slice(100)).toEqual([350, 450]);
  });

  it('refills the rate bucket with the time elapsed since the last retry, up to the burst', () => {
    vi.setSystemTime(10_000);
    const { queue } = queueWith(async () => undefined, {
      backoff: { baseMs: 100, maxMs: 100, jitter: 0, retriesPerSecond: 2, burst: 2 },
    });
    expect([queue.retryDelay(1), queue.retryDelay(1)]).toEqual([100, 100]);
    // 750 ms later 1.5 tokens have come back: one retry is free, the next waits 250 ms for the half.
    vi.setSystemTime(10_750);
    expect([queue.retryDelay(1), queue.retryDelay(1)]).toEqual([100, 350]);
    // A long pause refills to the burst (2), not beyond it.
    vi.setSystemTime(100_000);
    expect([queue.retryDelay(1), queue.retryDelay(1), queue.retryDelay(1)]).toEqual([100, 100, 600]);
  });
});

describe('WorkQueue.addAfter', () => {
  it('adds at once for a delay of 0 or less, and not before the delay otherwise', async () => {
    const runs: string[] = [];
    const { queue } = queueWith(async (key) => {
      runs.push(`${key}@${Date.now()}`);
    });
    queue.addAfter('now', 0);
    queue.addAfter('past', -5);
    // Synchronously: the handler has been called before any timer could fire.
    expect(runs).toEqual(['now@0', 'past@0']);
    queue.addAfter('later', 100);
    await vi.advanceTimersByTimeAsync(99);
    expect(runs).toEqual(['now@0', 'past@0']);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toEqual(['now@0', 'past@0', 'later@100']);
  });

  it('keeps the earlier of two delays for one key and runs it once', async () => {
    const runs: string[] = [];
    const { queue } = queueWith(async (key) => {
      runs.push(`${key}@${Date.now()}`);
    });
    queue.addAfter('a', 1000);
    queue.addAfter('a', 500);
    queue.addAfter('b', 500);
    queue.addAfter('b', 1000);
    await vi.advanceTimersByTimeAsync(5000);
    expect(runs).toEqual(['a@500', 'b@500']);
  });

  it('a second addAfter for the same moment keeps the first one’s place among other keys', async () => {
    const runs: string[] = [];
    const { queue } = queueWith(
      async (key) => {
        runs.push(key);
      },
      { concurrency: 1 },
    );
    queue.addAfter('a', 500);
    queue.addAfter('b', 500);
    queue.addAfter('a', 500);
    await vi.advanceTimersByTimeAsync(500);
    expect(runs).toEqual(['a', 'b']);
  });

  it('does nothing after stop(), not even leave a timer behind', async () => {
    let calls = 0;
    const { queue } = queueWith(async () => {
      calls++;
    });
    queue.stop();
    queue.addAfter('a', 0);
    queue.addAfter('b', 100);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toBe(0);
  });

  it('a key that fails after stop() schedules no retry', async () => {
    let fail: (error: Error) => void = () => undefined;
    const { queue, delays } = queueWith(
      () =>
        new Promise<void>((_resolve, reject) => {
          fail = reject;
        }),
    );
    queue.add('a');
    queue.stop();
    fail(new Error('late'));
    await vi.advanceTimersByTimeAsync(0);
    expect(delays).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an add that cancels a waiting retry lets the next failure schedule its own retry', async () => {
    let calls = 0;
    const ran: number[] = [];
    const { queue } = queueWith(
      async () => {
        calls++;
        ran.push(Date.now());
        if (calls <= 2) throw new Error('transient');
      },
      { backoff: { baseMs: 5000, jitter: 0 } },
    );
    queue.add('fn'); // fails at 0: retry due at 5000
    await vi.advanceTimersByTimeAsync(1);
    queue.add('fn'); // runs at 1 instead, fails again: retry due at 1 + 10000
    await vi.advanceTimersByTimeAsync(20_000);
    expect(ran).toEqual([0, 1, 10_001]);
  });

  it('does not keep the process alive for a waiting retry (the timer is unref’d)', () => {
    vi.useRealTimers();
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      const queue = new WorkQueue({ handler: async () => undefined, onError: () => undefined });
      queue.addAfter('a', 60_000);
      const timer = spy.mock.results.at(-1)?.value as NodeJS.Timeout;
      expect(timer.hasRef()).toBe(false);
      queue.stop();
    } finally {
      spy.mockRestore();
    }
  });
});
