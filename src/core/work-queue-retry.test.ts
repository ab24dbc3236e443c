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
    queue.stop();
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toBe(1);
  });
});
