import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Builder, JobOutcome, JobRunner } from '../core/interfaces.js';
import type { BuildRecord, FunctionJob, SlessFunction } from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { reconcileJob } from './job-reconcile.js';

const record = (buildKey: string): BuildRecord => ({
  buildKey,
  commit: 'c'.repeat(40),
  result: 'Succeeded',
  startedAt: 't0',
});

/** Builds exist only for the keys given; the reconciler is what is under test. */
function builderWith(keys: string[]): Builder {
  return {
    lookup: async (_fn, key) => (keys.includes(key) ? record(key) : undefined),
    build: async () => {
      throw new Error('the job reconciler never builds');
    },
  };
}

function recordingRunner(): JobRunner & { runs: string[] } {
  const runs: string[] = [];
  return {
    runs,
    run: async (job, _fn, build): Promise<JobOutcome> => {
      runs.push(`${job.metadata.name}#${job.spec.runId}@${build.buildKey}`);
      return { phase: 'Succeeded', startTime: 't1', completionTime: 't2', exitCode: 0 };
    },
  };
}

async function setUp(functionBuildKey: string, jobStatus?: FunctionJob['status']) {
  const store = new MemoryStore();
  const fn: SlessFunction = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name: 'f', namespace: 'ns', annotations: { 'sless.dev/build-key': functionBuildKey } },
    spec: { runtime: 'nodejs20', entrypoint: 'h.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  };
  await store.apply(fn);
  const job = await store.apply({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'FunctionJob',
    metadata: { name: 'j', namespace: 'ns' },
    spec: { function: 'f', runId: 1, event: { a: 1 } },
  });
  if (jobStatus) await store.patchStatus(job, jobStatus);
  return store;
}

describe('reconcileJob', () => {
  it('waits in Pending while the function has no build, then runs once', async () => {
    const store = await setUp('k1');
    const jobs = recordingRunner();
    await reconcileJob(
      { store, builder: builderWith([]), jobs, logger: pino({ level: 'silent' }) },
      'ns',
      'j',
    );
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({ phase: 'Pending' });
    await reconcileJob(
      { store, builder: builderWith(['k1']), jobs, logger: pino({ level: 'silent' }) },
      'ns',
      'j',
    );
    await reconcileJob(
      { store, builder: builderWith(['k1']), jobs, logger: pino({ level: 'silent' }) },
      'ns',
      'j',
    );
    expect(jobs.runs).toEqual(['j#1@k1']);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({
      phase: 'Succeeded',
      observedRunId: 1,
      buildKey: 'k1',
    });
  });

  it('attaches a running run to the build it started with, even after the function moved on', async () => {
    const store = await setUp('k2', { phase: 'Running', observedRunId: 1, buildKey: 'k1', startTime: 't0' });
    const jobs = recordingRunner();
    await reconcileJob(
      { store, builder: builderWith(['k1']), jobs, logger: pino({ level: 'silent' }) },
      'ns',
      'j',
    );
    expect(jobs.runs).toEqual(['j#1@k1']);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({
      phase: 'Succeeded',
      startTime: 't1',
    });
  });

  it('never sends a started run back to Pending', async () => {
    const store = await setUp('k2', { phase: 'Running', observedRunId: 1, buildKey: 'k1', startTime: 't0' });
    const jobs = recordingRunner();
    await reconcileJob(
      { store, builder: builderWith([]), jobs, logger: pino({ level: 'silent' }) },
      'ns',
      'j',
    );
    expect(jobs.runs).toEqual([]);
    expect((await store.get('FunctionJob', 'ns', 'j'))?.status).toMatchObject({ phase: 'Running' });
  });
});
