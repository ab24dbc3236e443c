/**
 * ReplicaWait's own rules, with a route cache reduced to the two things it reads (whether the watches
 * are up, and a change listener the test calls): no wait while disconnected, a change that leaves the
 * function without a replica keeps its requests held, readiness is read once per change for all of
 * them, and stop ends every wait. The kube test test/kube/replica-wait.test.ts covers it end to end.
 */
import { describe, expect, it } from 'vitest';
import { ReplicaWait, type ReplicaWaitEnd } from './replica-wait.js';

function cacheOf(connected: boolean) {
  const listeners = new Set<(namespace: string, name: string) => void>();
  return {
    connected: () => connected,
    onChange(listener: (namespace: string, name: string) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    change: (namespace: string, name: string) => {
      for (const listener of listeners) listener(namespace, name);
    },
  };
}

/** Resolves with the wait's end, or 'pending' if it has not ended once queued work has run. */
const endOf = async (wait: Promise<ReplicaWaitEnd>) =>
  Promise.race([wait, new Promise<'pending'>((r) => setImmediate(() => r('pending')))]);

describe('ReplicaWait', () => {
  it('does not hold a request while the watches are down', async () => {
    const wait = new ReplicaWait({ cache: cacheOf(false), timeoutMs: 60_000, maxHeldPerFunction: 10 });
    expect(await endOf(wait.wait('ns', 'f', () => false))).toBe('disconnected');
    expect(wait.held('ns', 'f')).toBe(0);
  });

  it('keeps requests held through changes without a replica, and lets all go on the one with', async () => {
    const cache = cacheOf(true);
    const wait = new ReplicaWait({ cache, timeoutMs: 60_000, maxHeldPerFunction: 10 });
    let available = false;
    let reads = 0;
    const ready = () => {
      reads++;
      return available;
    };
    const held = [wait.wait('ns', 'f', ready), wait.wait('ns', 'f', ready), wait.wait('ns', 'f', ready)];
    cache.change('ns', 'f');
    cache.change('ns', 'other');
    expect(await Promise.all(held.map(endOf))).toEqual(['pending', 'pending', 'pending']);
    expect(wait.held('ns', 'f')).toBe(3);
    available = true;
    cache.change('ns', 'f');
    expect(await Promise.all(held)).toEqual(['changed', 'changed', 'changed']);
    // Once per change of f, not once per held request.
    expect(reads).toBe(2);
    expect(wait.held('ns', 'f')).toBe(0);
  });

  it('ends every wait when stopped', async () => {
    const wait = new ReplicaWait({ cache: cacheOf(true), timeoutMs: 60_000, maxHeldPerFunction: 10 });
    const held = [wait.wait('ns', 'f', () => false), wait.wait('ns', 'g', () => false)];
    wait.stop();
    expect(await Promise.all(held)).toEqual(['timeout', 'timeout']);
    expect(wait.held('ns', 'f') + wait.held('ns', 'g')).toBe(0);
  });
});
