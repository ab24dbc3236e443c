/**
 * The FunctionJob reconciler, table-driven, against MemoryStore with a fake builder (builds exist
 * for the keys a row gives) and a fake job runner. Each row gives the world before one reconcile and
 * the Ready condition it must leave behind.
 */
import { describe, expect, it } from 'vitest';
import {
  builderWith,
  functionResource,
  recordingRunner,
  silentLogger,
} from '../../../test/helpers/reconcile-fakes.js';
import type { Builder, JobOutcome, JobRunner, ObjectStore } from '../../core/interfaces.js';
import type { FunctionJob, FunctionJobStatus } from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { InFlight } from '../runtime/in-flight.js';
import { objectRef } from '../runtime/object-ref.js';
import { reconcileAndPatch } from '../runtime/patch.js';
import { finalizeJob, reconcileJob } from './reconciler.js';

/**
 * Reconciles FunctionJob ns/j as the controller does: one pass, then one more each time its run
 * ends in the background, until nothing runs and nothing was queued. Returns the passes made.
 */
async function reconcileUntilQuiet(deps: {
  store: ObjectStore;
  builder: Builder;
  jobs: JobRunner;
}): Promise<number> {
  let queued = 0;
  const full = { ...deps, logger: silentLogger, runs: new InFlight<JobOutcome>(() => queued++) };
  for (let passes = 1; ; passes++) {
    // A run that never settles into one outcome would loop here for ever; a handful of passes is plenty.
    if (passes > 10) throw new Error('FunctionJob ns/j did not settle in 10 passes');
    queued = 0;
    await reconcileAndPatch({
      store: deps.store,
      logger: silentLogger,
      ref: objectRef('FunctionJob', 'ns', 'j'),
      retryDelayMs: () => 1000,
      reconcile: (job: FunctionJob, update: StatusUpdate<FunctionJobStatus>) =>
        reconcileJob(full, job, update),
      finalize: () => finalizeJob(full, 'ns', 'j'),
    });
    if (full.runs.size === 0 && queued === 0) return passes;
    await full.runs.idle();
  }
}

async function setUp(options: {
  functionBuildKey?: string;
  runId?: number;
  jobStatus?: FunctionJob['status'];
}) {
  const store = new MemoryStore();
  if (options.functionBuildKey !== undefined)
    await store.apply(functionResource('f', { 'sless.dev/build-key': options.functionBuildKey }));
  const job = await store.apply({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'FunctionJob',
    metadata: { name: 'j', namespace: 'ns' },
    spec: { function: 'f', runId: options.runId ?? 1, event: { a: 1 } },
  });
  if (options.jobStatus) await store.patchStatus(job, options.jobStatus);
  return store;
}

const failedRun: JobOutcome = {
  phase: 'Failed',
  startTime: 't1',
  completionTime: 't2',
  exitCode: 1,
  message: 'handler threw: boom',
};
const running = { phase: 'Running', observedRunId: 1, buildKey: 'k1', startTime: 't0' } as const;

interface Row {
  name: string;
  runId?: number;
  /** The function's current build key; no function when undefined. */
  fn?: string | undefined;
  /** The keys that have a finished build. */
  builds?: string[];
  before?: FunctionJob['status'];
  outcome?: JobOutcome | Error;
  expect: {
    phase: string;
    /** No Ready condition when undefined (the reconcile wrote nothing). */
    ready?: ['True' | 'False', string];
    message?: string;
    runs: string[];
    observedRunId?: number;
  };
}

const rows: Row[] = [
  {
    name: 'runId 0: created, not run',
    runId: 0,
    fn: 'k1',
    builds: ['k1'],
    expect: { phase: 'Skipped', ready: ['True', Reason.Skipped], runs: [], observedRunId: 0 },
  },
  {
    name: 'the function does not exist',
    fn: undefined,
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.FunctionNotFound],
      message: 'function "f" not found in namespace ns',
      runs: [],
      observedRunId: 1,
    },
  },
  {
    name: 'the function has no build yet: Pending',
    fn: 'k1',
    builds: [],
    expect: { phase: 'Pending', ready: ['False', Reason.WaitingForBuild], runs: [] },
  },
  {
    name: 'built: runs once and succeeds',
    fn: 'k1',
    builds: ['k1'],
    expect: { phase: 'Succeeded', ready: ['True', Reason.Succeeded], runs: ['j#1@k1'], observedRunId: 1 },
  },
  {
    name: 'the run ends Failed: the runner says why',
    fn: 'k1',
    builds: ['k1'],
    outcome: failedRun,
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.Failed],
      message: 'handler threw: boom',
      runs: ['j#1@k1'],
      observedRunId: 1,
    },
  },
  {
    name: 'the runner throws: RunFailed',
    fn: 'k1',
    builds: ['k1'],
    outcome: new Error('pod evicted'),
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.RunFailed],
      message: 'pod evicted',
      runs: ['j#1@k1'],
      observedRunId: 1,
    },
  },
  {
    name: 'this runId finished already: not run again',
    fn: 'k1',
    builds: ['k1'],
    before: { phase: 'Succeeded', observedRunId: 1 },
    expect: { phase: 'Succeeded', runs: [], observedRunId: 1 },
  },
  {
    name: 'a new runId after a finished run runs again',
    runId: 2,
    fn: 'k1',
    builds: ['k1'],
    before: { phase: 'Succeeded', observedRunId: 1 },
    expect: { phase: 'Succeeded', ready: ['True', Reason.Succeeded], runs: ['j#2@k1'], observedRunId: 2 },
  },
  {
    name: 'a running run attaches to the build it started with, though the function moved on',
    fn: 'k2',
    builds: ['k1', 'k2'],
    before: running,
    expect: { phase: 'Succeeded', ready: ['True', Reason.Succeeded], runs: ['j#1@k1'], observedRunId: 1 },
  },
  {
    name: 'a running run whose build is not visible is left Running, never sent back to Pending',
    fn: 'k2',
    builds: [],
    before: running,
    expect: { phase: 'Running', runs: [], observedRunId: 1 },
  },
];

describe('reconcileJob', () => {
  it.each(rows)('$name', async (row) => {
    const store = await setUp({
      ...(row.fn !== undefined ? { functionBuildKey: row.fn } : {}),
      ...(row.runId !== undefined ? { runId: row.runId } : {}),
      ...(row.before ? { jobStatus: row.before } : {}),
    });
    const jobs = recordingRunner(row.outcome);
    await reconcileUntilQuiet({ store, builder: builderWith(row.builds ?? []), jobs });
    const status = (await store.get('FunctionJob', 'ns', 'j'))?.status;
    const ready = status?.conditions?.find((c) => c.type === 'Ready');
    expect(status?.phase).toBe(row.expect.phase);
    expect(ready && [ready.status, ready.reason]).toEqual(row.expect.ready);
    if (row.expect.message !== undefined) expect(ready?.message).toBe(row.expect.message);
    expect(status?.observedRunId).toBe(row.expect.observedRunId);
    if (row.expect.ready) {
      for (const c of status?.conditions ?? []) expect(c.observedGeneration).toBe(1);
      expect(status?.observedGeneration).toBe(1);
    }
    expect(jobs.runs).toEqual(row.expect.runs);
  });

  it('waits in Pending while the function has no build, then runs once', async () => {
    const store = await setUp({ functionBuildKey: 'k1' });
    const jobs = recordingRunner();
    const reconcile = (keys: string[]) => reconcileUntilQuiet({ store, builder: builderWith(keys), jobs });
    await reconcile([]);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({ phase: 'Pending' });
    await reconcile(['k1']);
    await reconcile(['k1']);
    expect(jobs.runs).toEqual(['j#1@k1']);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({
      phase: 'Succeeded',
      observedRunId: 1,
      buildKey: 'k1',
    });
  });
});

describe('a run in the background', () => {
  it('returns while the run goes on, says Running, starts it once, and takes its outcome when it ends', async () => {
    const store = await setUp({ functionBuildKey: 'k1' });
    let finish: (outcome: JobOutcome) => void = () => undefined;
    const runs: string[] = [];
    const jobs: JobRunner = {
      run: (job) => {
        runs.push(`${job.metadata.name}#${job.spec.runId}`);
        return new Promise<JobOutcome>((resolve) => {
          finish = resolve;
        });
      },
    };
    let queued = 0;
    const deps = {
      store,
      builder: builderWith(['k1']),
      jobs,
      logger: silentLogger,
      runs: new InFlight<JobOutcome>(() => queued++),
    };
    const pass = () =>
      reconcileAndPatch({
        store,
        logger: silentLogger,
        ref: objectRef('FunctionJob', 'ns', 'j'),
        retryDelayMs: () => 1000,
        reconcile: (job: FunctionJob, update: StatusUpdate<FunctionJobStatus>) =>
          reconcileJob(deps, job, update),
        finalize: () => finalizeJob(deps, 'ns', 'j'),
      });
    await pass();
    const started = (await store.get('FunctionJob', 'ns', 'j'))?.status;
    expect(started).toMatchObject({ phase: 'Running', observedRunId: 1, buildKey: 'k1' });
    // A resync while it runs attaches: no second run, and the start time stays.
    await pass();
    expect(runs).toEqual(['j#1']);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status?.startTime).toBe(started?.startTime);
    expect(queued).toBe(0);
    finish({ phase: 'Succeeded', startTime: 't1', completionTime: 't2', exitCode: 0 });
    await deps.runs.idle();
    expect(queued).toBe(1);
    await pass();
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({
      phase: 'Succeeded',
      observedRunId: 1,
      exitCode: 0,
    });
    await pass();
    expect(runs).toEqual(['j#1']);
  });
});
