/**
 * FunctionJob semantics from the seeds: runId 0 creates the object without running it (Skipped);
 * each new runId runs the function once, at its current build. The run is keyed by (job, runId), so
 * reconciling the same run twice never starts it twice.
 */
import type { Logger } from 'pino';
import { asError } from '../core/errors.js';
import type { Builder, JobRunner, ObjectStore } from '../core/interfaces.js';
import { ANNOTATION_BUILD_KEY, type FunctionJobStatus, type JobPhase } from '../core/resources.js';
import { Reason, StatusUpdate } from '../core/status.js';

export interface JobReconcileDeps {
  store: ObjectStore;
  builder: Builder;
  jobs: JobRunner;
  logger: Logger;
}

export async function reconcileJob(deps: JobReconcileDeps, namespace: string, name: string): Promise<void> {
  const job = await deps.store.get('FunctionJob', namespace, name);
  if (!job) return;
  const runId = job.spec.runId ?? 0;
  const current = job.status ?? {};
  const write = (
    phase: JobPhase,
    fields: FunctionJobStatus,
    ready: boolean,
    reason: Reason,
    message: string,
  ) => {
    const update = new StatusUpdate<FunctionJobStatus>(job, {
      ...fields,
      phase,
      message,
      ...(current.conditions ? { conditions: current.conditions } : {}),
    });
    return update.set('Ready', ready, reason, message).write(deps.store, job);
  };

  if (runId === 0) {
    await write('Skipped', { observedRunId: 0 }, true, Reason.Skipped, 'runId is 0: not run');
    return;
  }
  const finished = current.phase === 'Succeeded' || current.phase === 'Failed';
  if (current.observedRunId === runId && finished) return;

  const fn = await deps.store.get('Function', namespace, job.spec.function);
  if (!fn) {
    await write(
      'Failed',
      { observedRunId: runId },
      false,
      Reason.FunctionNotFound,
      `function "${job.spec.function}" not found in namespace ${namespace}`,
    );
    return;
  }
  // A run already under way (or left by a restarted controller) is attached to with the build it
  // started with; re-checking the function's current build would send it back to Pending.
  const attaching =
    current.observedRunId === runId && current.phase === 'Running' && current.buildKey !== undefined;
  const buildKey = attaching ? current.buildKey : fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
  const build = buildKey ? await deps.builder.lookup(fn, buildKey) : undefined;
  if (!build && attaching) {
    // Never send a started run back to Pending; the next event tries to attach again.
    deps.logger.warn(
      { job: `${namespace}/${name}`, buildKey },
      'the build of a running job is not visible; left as is',
    );
    return;
  }
  if (!build) {
    await write(
      'Pending',
      { observedRunId: current.observedRunId },
      false,
      Reason.WaitingForBuild,
      `waiting for a build of function "${fn.metadata.name}"`,
    );
    return;
  }
  const startTime = attaching && current.startTime ? current.startTime : new Date().toISOString();
  await write(
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
  try {
    const outcome = await deps.jobs.run(job, fn, build);
    const ok = outcome.phase === 'Succeeded';
    await write(
      outcome.phase,
      { ...outcome, observedRunId: runId },
      ok,
      ok ? Reason.Succeeded : Reason.Failed,
      outcome.message ?? `run ${runId} ${ok ? 'succeeded' : 'failed'}`,
    );
  } catch (thrown) {
    const error = asError(thrown);
    deps.logger.warn({ job: `${namespace}/${name}`, err: error.message }, 'job run failed');
    await write(
      'Failed',
      { observedRunId: runId, startTime, completionTime: new Date().toISOString() },
      false,
      Reason.RunFailed,
      error.message,
    );
  }
}
