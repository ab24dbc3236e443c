/**
 * The canary step through the function reconciler and the reconcile runtime, against MemoryStore
 * with a fake canary control whose answers the test sets: a canary that breaches its error rate is
 * rolled back and stalled (only a new revision moves it on), with the stable revision serving, and
 * stays so on every later pass without being requeued.
 */
import { describe, expect, it } from 'vitest';
import { buildRecord, functionResource, silentLogger } from '../../../test/helpers/reconcile-fakes.js';
import { RolloutError } from '../../core/errors.js';
import type { CanaryControl, LiveCanary, SourceSnapshot } from '../../core/interfaces.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  type BuildRecord,
  type FunctionStatus,
  type SlessFunction,
} from '../../core/resources.js';
import type { StatusUpdate } from '../../core/status.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { InFlight } from '../runtime/in-flight.js';
import { objectRef } from '../runtime/object-ref.js';
import { reconcileAndPatch } from '../runtime/patch.js';
import { type FunctionReconcileDeps, reconcileFunction, revisionOf } from './reconciler.js';

const KEY = 'b'.repeat(32);
const CONFIG = 'f'.repeat(32);
const COMMIT = 'c'.repeat(40);
const REVISION = revisionOf(KEY, CONFIG, true);
const STABLE = 'a'.repeat(12);

/** A canary control whose live canary's answers are whatever the test last said. */
function fakeCanary() {
  let live: LiveCanary | undefined;
  const calls: string[] = [];
  /** What the next start does after it holds the canary: waits on `until`, or fails with `error`. */
  let nextStart: { until?: Promise<void>; error?: Error } = {};
  const control: CanaryControl = {
    start: async (_fn, _build, options, weight) => {
      calls.push(`start ${options.revision} at ${weight}%`);
      const { until, error } = nextStart;
      nextStart = {};
      if (error) throw error;
      // As kube's does: what it holds of the canary is there before its pods serve.
      live = {
        revision: options.revision,
        weight,
        alive: true,
        since: Date.now(),
        figures: { requests: 0, errors: 0 },
      };
      await until;
    },
    live: () => live,
    setWeight: (_namespace, _name, weight) => {
      calls.push(`weight ${weight}%`);
      if (live) live = { ...live, weight, since: Date.now(), figures: { requests: 0, errors: 0 } };
    },
    promote: async () => {
      calls.push('promote');
      live = undefined;
    },
    abort: async () => {
      calls.push('abort');
      live = undefined;
    },
  };
  return {
    control,
    calls,
    /** The next start holds its canary until `until` resolves, before it serves. */
    holdNextStart: (until: Promise<void>) => {
      nextStart = { until };
    },
    failNextStart: (error: Error) => {
      nextStart = { error };
    },
    answered: (requests: number, errors: number) => {
      if (live) live.figures = { requests, errors, p99Ms: 12 };
    },
  };
}

async function setUp() {
  const store = new MemoryStore();
  const fn = functionResource('f', {
    [ANNOTATION_BUILD_KEY]: KEY,
    [ANNOTATION_CONFIG_HASH]: CONFIG,
    [ANNOTATION_COMMIT]: COMMIT,
  });
  fn.spec.rollout = { canary: { steps: [10, 50], stepSeconds: 60, maxErrorRate: 0.05, minRequests: 20 } };
  await store.apply(fn);
  // The stable revision served and was Ready before this commit.
  const applied = (await store.get('Function', 'ns', 'f')) as SlessFunction;
  await store.patchStatus(applied, { servingRevision: STABLE, phase: 'Ready' });
  const canary = fakeCanary();
  const deploys: string[] = [];
  let queued = 0;
  const deps: FunctionReconcileDeps = {
    store,
    builder: { lookup: async (_fn, key) => buildRecord(key, COMMIT), build: async () => buildRecord(KEY) },
    platform: {
      deploy: async (_fn, _build, { revision }) => {
        deploys.push(revision);
      },
      remove: async () => undefined,
      currentRevision: () => STABLE,
      canary: canary.control,
    },
    logger: silentLogger,
    externalUrl: 'http://sless.test',
    snapshotFor: async () => ({ snapshot: {} as SourceSnapshot, manifestFiles: new Set<string>() }),
    failedBuilds: new Map(),
    builds: new InFlight<BuildRecord>(() => queued++),
    rollouts: new InFlight<void>(() => queued++, { rerunWhenAskedAgain: true }),
  };
  /** One pass, without waiting for the tasks it started. */
  const passNow = () =>
    reconcileAndPatch({
      store,
      logger: silentLogger,
      ref: objectRef('Function', 'ns', 'f'),
      retryDelayMs: () => 1000,
      reconcile: (object: SlessFunction, update: StatusUpdate<FunctionStatus>) =>
        reconcileFunction(deps, object, update),
      finalize: async () => undefined,
    });
  const pass = async () => {
    const result = await passNow();
    await deps.rollouts.idle();
    return result;
  };
  const status = async () => (await store.get('Function', 'ns', 'f'))?.status;
  const conditions = () =>
    status().then((s) => (s?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message]));
  return { canary, deploys, pass, passNow, status, conditions, idle: () => deps.rollouts.idle() };
}

describe('a canary that breaches its limits', () => {
  it('is rolled back and stalled with CanaryRolledBack, the stable revision serving, and stays so', async () => {
    const { canary, deploys, pass, status } = await setUp();
    // The start, then the first step begins: in progress, looked at again soon.
    await pass();
    expect(await pass()).toEqual({ requeueAfterMs: expect.any(Number) });
    const progressing = await status();
    expect(progressing?.canary?.phase).toBe('Progressing');
    expect(progressing?.conditions?.find((c) => c.type === 'Stalled')).toBeUndefined();

    // A quarter of its answers are 5xx: rolled back, and nothing but a new revision moves it on.
    canary.answered(40, 10);
    expect(await pass()).toEqual({});
    const why = `canary ${REVISION} rolled back at 10% (step 1 of 2): error rate over 5.0%: 10 of 40 answers were 5xx (25.0%), p99 12 ms`;
    const after = await status();
    expect(after?.canary).toMatchObject({ phase: 'RolledBack', revision: REVISION, message: why });
    expect([after?.phase, after?.lastError, after?.servingRevision]).toEqual(['Failed', why, STABLE]);
    const conditions = () =>
      status().then((s) =>
        (s?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message, c.observedGeneration]),
      );
    const stalled = [
      ['Ready', 'False', 'CanaryRolledBack', `${why}; still serving ${STABLE}`, 1],
      ['Reconciling', 'False', 'CanaryRolledBack', `${why}; still serving ${STABLE}`, 1],
      ['Stalled', 'True', 'CanaryRolledBack', why, 1],
    ];
    expect(await conditions()).toEqual(stalled);
    expect(canary.calls).toEqual([`start ${REVISION} at 10%`, 'abort']);

    // Every later pass (a resync) finds it the same: not requeued, not started again, still stalled.
    expect(await pass()).toEqual({});
    expect(await conditions()).toEqual(stalled);
    expect((await status())?.phase).toBe('Failed');
    expect(canary.calls).toEqual([`start ${REVISION} at 10%`, 'abort']);
    expect(deploys).toEqual([]);
  });
});

describe('a canary that is starting', () => {
  it('begins its step only once its start ended, however many passes come while it runs', async () => {
    const { canary, passNow, pass, status, conditions, idle } = await setUp();
    let serve: () => void = () => undefined;
    canary.holdNextStart(
      new Promise<void>((resolve) => {
        serve = resolve;
      }),
    );
    const starting = `starting canary ${REVISION} beside ${STABLE} at 10%`;
    expect(await passNow()).toEqual({});
    // Passes while it starts (a Deployment's event, a resync): still starting, no step, no clock.
    for (let i = 0; i < 3; i++) {
      expect(await passNow()).toEqual({});
      const s = await status();
      expect(s?.canary).toBeUndefined();
      expect([s?.phase, s?.servingRevision]).toEqual(['Deploying', STABLE]);
      const ready = (await conditions()).find(([type]) => type === 'Ready');
      expect(ready?.slice(2)).toEqual(['CanaryProgressing', starting]);
    }
    const before = Date.now();
    serve();
    await idle();
    expect(await pass()).toEqual({ requeueAfterMs: expect.any(Number) });
    const s = await status();
    expect(s?.canary).toMatchObject({ phase: 'Progressing', revision: REVISION, step: 0, weight: 10 });
    expect(Date.parse(s?.canary?.stepStartedAt ?? '')).toBeGreaterThanOrEqual(before - 1);
    expect(canary.calls).toEqual([`start ${REVISION} at 10%`]);
  });

  it('that fails to start is Failed with RolloutFailed, the stable revision serving, and not started again at once', async () => {
    const { canary, pass, status, conditions } = await setUp();
    const why = `revision ${REVISION} did not become ready: pod f-canary-x: CrashLoopBackOff`;
    canary.failNextStart(new RolloutError(why));
    expect(await pass()).toEqual({});
    // The pass after the failed start reports it; the work queue's backoff starts it again later.
    await expect(pass()).rejects.toThrow(`canary of ${REVISION} failed to start: ${why}`);
    const s = await status();
    expect([s?.phase, s?.lastError, s?.servingRevision, s?.canary]).toEqual([
      'Failed',
      why,
      STABLE,
      undefined,
    ]);
    expect((await conditions()).find(([type]) => type === 'Ready')).toEqual([
      'Ready',
      'False',
      'RolloutFailed',
      `${why}; still serving ${STABLE}`,
    ]);
    expect(canary.calls).toEqual([`start ${REVISION} at 10%`]);
  });
});
