/**
 * What each class of error a reconcile throws asks of the runtime and the work queue, through both
 * as the controller wires them: Stalled is written as Stalled and never requeued, Waiting runs again
 * after exactly its delay without touching the backoff, anything else is retried with backoff.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { functionResource, silentLogger } from '../../../test/helpers/reconcile-fakes.js';
import type { FunctionStatus } from '../../core/resources.js';
import { WorkQueue } from '../../core/work-queue.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { StalledError, WaitingError } from './errors.js';
import { objectRef, refFromKey } from './object-ref.js';
import { reconcileAndPatch } from './patch.js';

const KEY = 'ns/f';

/** A Function whose every reconcile throws what `thrown` makes, run by a WorkQueue with a 10 s backoff. */
async function driven(thrown: () => Error, status?: FunctionStatus) {
  const store = new MemoryStore();
  const applied = await store.apply(functionResource('f'));
  if (status) await store.patchStatus(applied, status);
  const runs: number[] = [];
  const retriesTold: number[] = [];
  const reserved: number[] = [];
  const logged: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logged.push(JSON.parse(line)) });
  const queue: WorkQueue = new WorkQueue({
    backoff: { baseMs: 10_000, jitter: 0 },
    handler: async (key) => {
      runs.push(Date.now());
      const result = await reconcileAndPatch({
        store,
        logger,
        ref: refFromKey('Function', key),
        retryDelayMs: () => {
          const delay = queue.reserveRetry(key);
          reserved.push(delay);
          return delay;
        },
        reconcile: async (_fn, update) => {
          update.status.phase = 'Failed';
          throw thrown();
        },
        finalize: async () => undefined,
      });
      return result.requeueAfterMs === undefined ? undefined : { requeueAfterMs: result.requeueAfterMs };
    },
    onError: (_key, _error, retryInMs) => retriesTold.push(retryInMs),
  });
  const conditions = async () => {
    const fn = await store.get('Function', 'ns', 'f');
    return {
      phase: fn?.status?.phase,
      conditions: (fn?.status?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message]),
    };
  };
  return { store, queue, runs, retriesTold, reserved, logged, conditions };
}

async function until(done: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('typed reconcile errors', () => {
  it('Stalled: Ready=False, Reconciling=False, Stalled=True, no requeue, no backoff, logged once', async () => {
    const d = await driven(
      () =>
        new StalledError('BuildFailed', 'build bbbb failed: npm ci exited 1', {
          readyMessage: 'build bbbb failed: npm ci exited 1; still serving r1',
        }),
    );
    d.queue.add(KEY);
    await d.queue.idle();
    // Long enough for a RequeueAfter or a retry that should not come.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(d.runs.length).toBe(1);
    expect(d.retriesTold).toEqual([]);
    expect(d.reserved).toEqual([]);
    expect(d.queue.failuresOf(KEY)).toBe(0);
    expect(await d.conditions()).toEqual({
      phase: 'Failed',
      conditions: [
        ['Ready', 'False', 'BuildFailed', 'build bbbb failed: npm ci exited 1; still serving r1'],
        ['Reconciling', 'False', 'BuildFailed', 'build bbbb failed: npm ci exited 1; still serving r1'],
        ['Stalled', 'True', 'BuildFailed', 'build bbbb failed: npm ci exited 1'],
      ],
    });
    // A resync finds the same stall: nothing more in the log.
    d.queue.add(KEY);
    await d.queue.idle();
    expect(d.runs.length).toBe(2);
    expect(d.logged.map((l) => [l.level, l.msg])).toEqual([
      [30, 'Function stalled: a retry cannot fix it, a change can'],
    ]);
    d.queue.stop();
  });

  it('Waiting: Ready=False, Reconciling=True, Stalled gone, run again after exactly its delay, no backoff', async () => {
    const d = await driven(
      () =>
        new WaitingError('SecretNotFound', 'secret "s" not found in namespace ns', 40, {
          readyMessage: 'secret "s" not found in namespace ns; still serving r1',
        }),
      {
        conditions: [
          {
            type: 'Stalled',
            status: 'True',
            reason: 'QuotaExceeded',
            message: 'no room',
            lastTransitionTime: '2026-01-01T00:00:00.000Z',
            observedGeneration: 1,
          },
        ],
      },
    );
    d.queue.add(KEY);
    // A backoff retry would wait 10 s: three runs well within that are the RequeueAfter's.
    await until(() => d.runs.length >= 3);
    expect(d.runs.length).toBeGreaterThanOrEqual(3);
    const [first = 0, second = 0] = d.runs;
    expect(second - first).toBeGreaterThanOrEqual(38);
    expect(second - first).toBeLessThan(5000);
    expect(d.retriesTold).toEqual([]);
    expect(d.reserved).toEqual([]);
    expect(d.queue.failuresOf(KEY)).toBe(0);
    expect(d.logged).toEqual([]);
    d.queue.stop();
    expect(await d.conditions()).toEqual({
      phase: 'Failed',
      conditions: [
        ['Ready', 'False', 'SecretNotFound', 'secret "s" not found in namespace ns; still serving r1'],
        ['Reconciling', 'True', 'SecretNotFound', 'secret "s" not found in namespace ns; still serving r1'],
      ],
    });
    // The delay asked for, as it is: not a backoff delay, not rounded.
    const result = await reconcileAndPatch({
      store: d.store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'f'),
      retryDelayMs: () => 1234,
      reconcile: async () => {
        throw new WaitingError('SecretNotFound', 'secret "s" not found in namespace ns', 60_000);
      },
      finalize: async () => undefined,
    });
    expect(result).toEqual({ requeueAfterMs: 60_000 });
  });

  it('anything else is transient: rethrown, retried with backoff, and status says when', async () => {
    const d = await driven(() => new Error('apiserver 500'));
    d.queue.add(KEY);
    await d.queue.idle();
    expect(d.runs.length).toBe(1);
    expect(d.reserved).toEqual([10_000]);
    expect(d.retriesTold).toEqual([10_000]);
    expect(d.queue.failuresOf(KEY)).toBe(1);
    d.queue.stop();
    expect(await d.conditions()).toEqual({
      phase: 'Failed',
      conditions: [
        ['Ready', 'False', 'ReconcileFailed', 'apiserver 500; retrying in 10s'],
        ['Reconciling', 'True', 'ProgressingWithRetry', 'apiserver 500; retrying in 10s'],
      ],
    });
  });
});
