/**
 * The FunctionJob reconciler. runId 0 creates the object without running it (Skipped); each new
 * runId runs the function once, at its current build. The run itself goes to the background
 * (InFlight, keyed by job and runId) and queues the job again when it ends, so no worker waits on a
 * run, and reconciling the same run twice never starts it twice. It fills the status update the
 * reconcile runtime writes once.
 */

import type { Logger } from 'pino';
import type { Builder, JobOutcome, JobRunner, ObjectStore } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import {
  ANNOTATION_BUILD_KEY,
  type FunctionJob,
  type FunctionJobStatus,
  type JobPhase,
} from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import type { InFlight } from '../runtime/in-flight.js';
import { refKey } from '../runtime/object-ref.js';
import { Done, type Result } from '../runtime/patch.js';

export interface JobReconcileDeps {
  store: ObjectStore;
  builder: Builder;
  jobs: JobRunner;
  logger: Logger;
  /** Runs in the background, one per job, keyed `namespace/name`, by runId. */
  runs: InFlight<JobOutcome>;
}

export async function reconcileJob(
  deps: JobReconcileDeps,
  job: FunctionJob,
  update: StatusUpdate<FunctionJobStatus>,
): Promise<Result> {
  const { namespace, name } = job.metadata;
  const key = refKey(job.metadata);
  const runId = job.spec.runId ?? 0;
  const current = job.status ?? {};
  const record = (
    phase: JobPhase,
    fields: FunctionJobStatus,
    ready: boolean,
    reason: Reason,
    message: string,
  ) => {
    Object.assign(update.status, fields, { phase, message });
    update.set('Ready', ready, reason, message);
  };

  if (runId === 0) {
    record('Skipped', { observedRunId: 0 }, true, Reason.Skipped, 'runId is 0: not run');
    return Done;
  }
  const finished = current.phase === 'Succeeded' || current.phase === 'Failed';
  if (current.observedRunId === runId && finished) return Done;

  const fn = await deps.store.get('Function', namespace, job.spec.function);
  if (!fn) {
    record(
      'Failed',
      { observedRunId: runId },
      false,
      Reason.FunctionNotFound,
      `function "${job.spec.function}" not found in namespace ${namespace}`,
    );
    return Done;
  }
  // A run already under way (or left by a restarted controller) is attached to with the build it
  // started with; re-checking the function's current build would send it back to Pending.
  const attaching =
    current.observedRunId === runId && current.phase === 'Running' && current.buildKey !== undefined;
  const buildKey = attaching ? current.buildKey : fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
  const build = buildKey ? await deps.builder.lookup(fn, buildKey) : undefined;
  if (!build && attaching) {
    // Never send a started run back to Pending; the next event tries to attach again.
    deps.logger.warn({ job: key, buildKey }, 'the build of a running job is not visible; left as is');
    return Done;
  }
  if (!build) {
    record(
      'Pending',
      { observedRunId: current.observedRunId },
      false,
      Reason.WaitingForBuild,
      `waiting for a build of function "${fn.metadata.name}"`,
    );
    return Done;
  }
  const run = deps.runs.ensure(key, String(runId), () => deps.jobs.run(job, fn, build));
  const startTime = attaching && current.startTime ? current.startTime : new Date().toISOString();
  if (run.state === 'Running') {
    if (attaching) return Done;
    record(
      'Running',
      {
        observedRunId: runId,
        buildKey: build.buildKey,
        startTime,
        completionTime: undefined,
        exitCode: undefined,
        outputTail: undefined,
        result: undefined,
      },
      false,
      Reason.Running,
      `run ${runId} started`,
    );
    return Done;
  }
  if (run.state === 'Succeeded') {
    const outcome = run.value;
    const ok = outcome.phase === 'Succeeded';
    record(
      outcome.phase,
      { ...outcome, observedRunId: runId, buildKey: build.buildKey },
      ok,
      ok ? Reason.Succeeded : Reason.Failed,
      outcome.message ?? `run ${runId} ${ok ? 'succeeded' : 'failed'}`,
    );
    return Done;
  }
  deps.logger.warn({ job: objectKey(namespace, name), err: run.error.message }, 'job run failed');
  record(
    'Failed',
    { observedRunId: runId, buildKey: build.buildKey, startTime, completionTime: new Date().toISOString() },
    false,
    Reason.RunFailed,
    run.error.message,
  );
  return Done;
}

/** The FunctionJob is gone: an outcome of its run that no reconcile will take is dropped. */
export function finalizeJob(deps: JobReconcileDeps, namespace: string, name: string): Promise<void> {
  deps.runs.forget(objectKey(namespace, name));
  return Promise.resolve();
}
