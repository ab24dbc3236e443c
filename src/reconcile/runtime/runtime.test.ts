/**
 * The reconcile runtime's parts: background tasks (one per key, outcome handed out once, the key
 * queued again when a task ends), the one status patch per reconcile, typed object references, and
 * the work queue's RequeueAfter and reserved retry delay.
 */
import { describe, expect, it } from 'vitest';
import {
  buildRecord,
  functionResource,
  reconcileUntilQuiet,
  silentLogger,
} from '../../../test/helpers/reconcile-fakes.js';
import { RecordedFailure } from '../../core/errors.js';
import type { ObjectStore, SourceSnapshot, WorkloadPlatform } from '../../core/interfaces.js';
import { ANNOTATION_BUILD_KEY, ANNOTATION_COMMIT, ANNOTATION_CONFIG_HASH } from '../../core/resources.js';
import { WorkQueue } from '../../core/work-queue.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { InFlight } from './in-flight.js';
import { objectRef, refFromKey, refKey } from './object-ref.js';
import { reconcileAndPatch, requeueAfter } from './patch.js';

describe('InFlight', () => {
  it('runs one task per key, hands its outcome out once, and queues the key when it ends', async () => {
    const queued: string[] = [];
    const tasks = new InFlight<string>((key) => queued.push(key));
    let finish: (value: string) => void = () => undefined;
    const work = () => new Promise<string>((resolve) => (finish = resolve));
    expect(tasks.ensure('ns/f', 'k1', work)).toEqual({ state: 'Running', started: true });
    // Asked again while it runs: nothing new starts, whatever id is asked for.
    expect(tasks.ensure('ns/f', 'k1', work)).toEqual({ state: 'Running', started: false });
    expect(tasks.ensure('ns/f', 'k2', work)).toEqual({ state: 'Running', started: false });
    expect(tasks.isRunning('ns/f')).toBe(true);
    finish('built');
    await tasks.idle();
    expect(queued).toEqual(['ns/f']);
    expect(tasks.ensure('ns/f', 'k1', work)).toEqual({ state: 'Succeeded', value: 'built' });
    // Handed out once: the next ask starts a new task.
    expect(tasks.ensure('ns/f', 'k1', work)).toEqual({ state: 'Running', started: true });
    finish('again');
    await tasks.idle();
    expect(queued).toEqual(['ns/f', 'ns/f']);
  });

  it('a finished task of another id is dropped, and the asked one starts', async () => {
    const tasks = new InFlight<string>(() => undefined);
    tasks.ensure('ns/f', 'old', async () => 'old build');
    await tasks.idle();
    expect(tasks.ensure('ns/f', 'new', async () => 'new build')).toEqual({ state: 'Running', started: true });
    await tasks.idle();
    expect(tasks.ensure('ns/f', 'new', async () => 'unused')).toEqual({
      state: 'Succeeded',
      value: 'new build',
    });
  });

  it('with rerunWhenAskedAgain, a success asked for again while it ran answers no one; a failure still does', async () => {
    const tasks = new InFlight<string>(() => undefined, { rerunWhenAskedAgain: true });
    let finish: (value: string) => void = () => undefined;
    tasks.ensure('ns/f', 'r1', () => new Promise<string>((resolve) => (finish = resolve)));
    // Something drifted while it ran: the pass for it asks for the same revision again.
    expect(tasks.ensure('ns/f', 'r1', async () => 'unused')).toEqual({ state: 'Running', started: false });
    finish('applied before the drift');
    await tasks.idle();
    expect(tasks.take('ns/f', 'r1')).toBeUndefined();
    expect(tasks.ensure('ns/f', 'r1', async () => 'applied after it')).toEqual({
      state: 'Running',
      started: true,
    });
    await tasks.idle();
    expect(tasks.take('ns/f', 'r1')).toEqual({ state: 'Succeeded', value: 'applied after it' });
    tasks.ensure('ns/f', 'r2', async () => {
      throw new Error('CrashLoopBackOff');
    });
    tasks.ensure('ns/f', 'r2', async () => 'unused');
    await tasks.idle();
    const failed = tasks.take('ns/f', 'r2');
    expect(failed?.state === 'Failed' && failed.error.message).toBe('CrashLoopBackOff');
  });

  it('keeps a failure as an Error, forgets on request, and queues nothing once stopped', async () => {
    const queued: string[] = [];
    const tasks = new InFlight<string>((key) => queued.push(key));
    tasks.ensure('ns/f', 'k', async () => {
      throw new Error('S3 unreachable');
    });
    await tasks.idle();
    const failed = tasks.ensure('ns/f', 'k', async () => 'x');
    expect(failed.state === 'Failed' && failed.error.message).toBe('S3 unreachable');
    await tasks.idle();
    tasks.forget('ns/f');
    expect(tasks.ensure('ns/f', 'k', async () => 'y')).toEqual({ state: 'Running', started: true });
    tasks.stop();
    await tasks.idle();
    expect(queued).toEqual(['ns/f']);
  });
});

describe('reconcileAndPatch', () => {
  const annotated = functionResource('f', {
    [ANNOTATION_BUILD_KEY]: 'b'.repeat(32),
    [ANNOTATION_CONFIG_HASH]: 'f'.repeat(32),
    [ANNOTATION_COMMIT]: 'c'.repeat(40),
  });

  function countingStore(): { store: MemoryStore; writes: Array<string | undefined> } {
    const store = new MemoryStore();
    const writes: Array<string | undefined> = [];
    const patch = store.patchStatus.bind(store);
    store.patchStatus = ((object, status) => {
      writes.push((status as { phase?: string }).phase);
      return patch(object, status);
    }) as ObjectStore['patchStatus'];
    return { store, writes };
  }

  it('a new build key costs one status write per pass: Building, Deploying, Ready', async () => {
    const { store, writes } = countingStore();
    await store.apply(annotated);
    let current: string | undefined;
    let built = false;
    const platform: WorkloadPlatform = {
      deploy: async (_fn, _build, { revision }) => {
        current = revision;
      },
      remove: async () => undefined,
      currentRevision: () => current,
    };
    const { passes } = await reconcileUntilQuiet(
      {
        store,
        builder: {
          lookup: async (_fn, key) => (built ? buildRecord(key) : undefined),
          build: async (request) => {
            built = true;
            return buildRecord(request.buildKey);
          },
        },
        platform,
        logger: silentLogger,
        externalUrl: 'http://sless.test',
        snapshotFor: async () => ({ snapshot: {} as SourceSnapshot, manifestFiles: new Set<string>() }),
        failedBuilds: new Map(),
      },
      'ns',
      'f',
    );
    expect(passes).toBe(3);
    expect(writes).toEqual(['Building', 'Deploying', 'Ready']);
  });

  it('a failure a retry may fix is written in the same patch as the rest, with the retry delay', async () => {
    const { store, writes } = countingStore();
    await store.apply(annotated);
    const error = await reconcileAndPatch({
      store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'f'),
      retryDelayMs: () => 4200,
      reconcile: async (_fn, update) => {
        update.status.phase = 'Deploying';
        throw new Error('apiserver 500');
      },
      finalize: async () => undefined,
    }).catch((thrown: unknown) => thrown);
    expect((error as Error).message).toBe('apiserver 500');
    expect(writes).toEqual(['Deploying']);
    const conditions = (await store.get('Function', 'ns', 'f'))?.status?.conditions ?? [];
    expect(conditions.map((c) => [c.type, c.status, c.reason, c.message])).toEqual([
      ['Ready', 'False', 'ReconcileFailed', 'apiserver 500; retrying in 5s'],
      ['Reconciling', 'True', 'ProgressingWithRetry', 'apiserver 500; retrying in 5s'],
    ]);
  });

  it('a RecordedFailure keeps what the reconciler wrote; a no-op pass writes nothing; a gone object is finalized', async () => {
    const { store, writes } = countingStore();
    await store.apply(annotated);
    await reconcileAndPatch({
      store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'f'),
      retryDelayMs: () => 1000,
      reconcile: async (_fn, update) => {
        update.set('Ready', false, 'RolloutFailed', 'pod p: CrashLoopBackOff');
        throw new RecordedFailure('rollout failed');
      },
      finalize: async () => undefined,
    }).catch(() => undefined);
    const ready = (await store.get('Function', 'ns', 'f'))?.status?.conditions?.[0];
    expect([ready?.reason, ready?.message]).toEqual(['RolloutFailed', 'pod p: CrashLoopBackOff']);
    const before = writes.length;
    const result = await reconcileAndPatch({
      store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'f'),
      retryDelayMs: () => 1000,
      reconcile: async () => requeueAfter(30_000),
      finalize: async () => undefined,
    });
    expect(result).toEqual({ requeueAfterMs: 30_000 });
    expect(writes.length).toBe(before);
    let finalized = 0;
    await reconcileAndPatch({
      store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'gone'),
      retryDelayMs: () => 1000,
      reconcile: async () => {
        throw new Error('not reached');
      },
      finalize: async () => {
        finalized++;
      },
    });
    expect(finalized).toBe(1);
  });
});

describe('object references', () => {
  it('keys and parses namespace/name, and refuses what is not one', () => {
    const ref = objectRef('Function', 'ns', 'f');
    expect(refKey(ref)).toBe('ns/f');
    expect(refFromKey('Function', 'ns/f')).toEqual(ref);
    for (const bad of ['f', '/f', 'ns/', 'a/b/c', ''])
      expect(() => refFromKey('Function', bad)).toThrow(/not a namespace\/name key/);
  });
});

describe('WorkQueue and the runtime', () => {
  it('runs a key again after the RequeueAfter its handler returned, and uses the retry delay it reserved', async () => {
    const runs: number[] = [];
    const errors: number[] = [];
    let queue: WorkQueue;
    let reserved = 0;
    queue = new WorkQueue({
      backoff: { baseMs: 10_000, jitter: 0 },
      handler: async () => {
        runs.push(Date.now());
        if (runs.length === 1) return { requeueAfterMs: 30 };
        if (runs.length === 2) {
          reserved = queue.reserveRetry('k');
          throw new Error('fails once');
        }
        return undefined;
      },
      onError: (_key, _error, retryInMs) => errors.push(retryInMs),
    });
    queue.add('k');
    const deadline = Date.now() + 5000;
    while (runs.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(runs.length).toBe(2);
    expect((runs[1] ?? 0) - (runs[0] ?? 0)).toBeGreaterThanOrEqual(25);
    await queue.idle();
    // The delay onError was told is the one reserved before the throw, and status showed.
    expect(reserved).toBe(10_000);
    expect(errors).toEqual([10_000]);
    queue.stop();
  });
});
