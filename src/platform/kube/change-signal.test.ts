/** ChangeSignal: a wait ends at the next change of its key, or after its fallback, and leaves nothing behind. */
import { describe, expect, it } from 'vitest';
import { ChangeSignal } from './change-signal.js';

const settledWithin = async (promise: Promise<void>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('ChangeSignal', () => {
  it('wakes every wait on the key that changed, and no other', async () => {
    const signal = new ChangeSignal();
    const a1 = signal.next('a', 60_000);
    const a2 = signal.next('a', 60_000);
    const b = signal.next('b', 60_000);
    signal.notify('a');
    expect(
      await settledWithin(
        Promise.all([a1, a2]).then(() => undefined),
        1000,
      ),
    ).toBe(true);
    expect(await settledWithin(b, 50)).toBe(false);
    expect(signal.size).toBe(1);
    signal.notifyAll();
    expect(await settledWithin(b, 1000)).toBe(true);
    expect(signal.size).toBe(0);
  });

  it('a change before anyone waits wakes no later wait; the fallback ends one that sees no change', async () => {
    const signal = new ChangeSignal();
    signal.notify('a');
    const waited = signal.next('a', 30);
    expect(await settledWithin(waited, 5)).toBe(false);
    expect(await settledWithin(waited, 1000)).toBe(true);
    expect(signal.size).toBe(0);
  });
});
