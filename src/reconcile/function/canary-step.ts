/**
 * The canary step of a Function's reconcile (`spec.rollout.canary`): it starts the new revision beside
 * the serving one at the first step's share, moves it to the next share after each `stepSeconds`,
 * promotes it after the last, and rolls it back the moment its answers breach a limit: a rollback
 * is thrown as a StalledError, since only a new revision moves it on. Each pass looks once and
 * returns a requeue; nothing here waits. The step and its start time live in status,
 * so a restart resumes the step the canary was in, with the old revision serving alone meanwhile.
 */

import type { AnswerFigures } from '../../core/canary.js';
import { CANARY_CHECK_MS, type CanarySpec, decideCanary, errorRateOf } from '../../core/canary.js';
import type { ConditionStatus } from '../../core/conditions.js';
import { RecordedFailure, RolloutError } from '../../core/errors.js';
import type { DeployOptions } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type {
  BuildRecord,
  CanaryStatus,
  FunctionPhase,
  FunctionStatus,
  SlessFunction,
} from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import { StalledError } from '../runtime/errors.js';
import { Done, type Result, requeueAfter } from '../runtime/patch.js';
import type { FunctionReconcileDeps } from './reconciler.js';

export interface CanaryStepInput {
  fn: SlessFunction;
  build: BuildRecord;
  revision: string;
  enabled: boolean;
  deployOptions: DeployOptions;
  update: StatusUpdate<FunctionStatus>;
  setPhase(phase: FunctionPhase, ready: ConditionStatus, reason: Reason, message: string): void;
  /** Ready as it was while something is in progress. */
  readyWhileInProgress(): ConditionStatus;
}

/**
 * A Result while a canary runs or stays rolled back; undefined when the plain path goes on: no canary
 * asked for, nothing serving to compare with, or the new revision serves already (promoted).
 */
export async function canaryStep(
  deps: FunctionReconcileDeps,
  input: CanaryStepInput,
): Promise<Result | undefined> {
  const { fn, revision, update } = input;
  const { namespace, name } = fn.metadata;
  const key = objectKey(namespace, name);
  const spec = fn.spec.rollout?.canary as CanarySpec | undefined;
  const control = deps.platform.canary;
  const status = update.status;
  const previous = status.canary;
  if (!spec || !control || !input.enabled) {
    // A rollout taken out of the spec mid-canary: the plain rollout replaces the canary.
    if (previous?.phase === 'Progressing') status.canary = undefined;
    return undefined;
  }
  const serving = await deps.platform.currentRevision(namespace, name);
  if (serving === revision || !serving) {
    // Promoted (maybe by the run before a restart, whose status write did not happen), or a first
    // rollout with nothing to compare with: the plain path records what serves.
    if (previous?.phase === 'Progressing')
      status.canary =
        previous.revision === revision
          ? { ...previous, phase: 'Promoted', weight: 100, message: `promoted ${revision}` }
          : undefined;
    const stale = control.live(namespace, name);
    if (stale && stale.revision !== revision) await control.abort(namespace, name);
    return undefined;
  }
  if (previous?.revision === revision && previous.phase === 'RolledBack') {
    // Stays rolled back until a new revision comes: the same code and settings would breach again.
    if (control.live(namespace, name)) await control.abort(namespace, name);
    // The message the rollback wrote; a status without one (written by hand) still says what it is.
    const message = previous.message ?? `canary ${revision} rolled back`;
    status.lastError = message;
    throw rolledBack(status, message, serving);
  }
  let live = control.live(namespace, name);
  // A newer revision during a canary starts over from the revision that serves.
  if (live && live.revision !== revision) {
    await control.abort(namespace, name);
    live = undefined;
  }
  const steps = spec.steps;
  const inProgress =
    previous?.revision === revision && previous.phase === 'Progressing' ? previous : undefined;
  // After a restart the canary resumes at the step it was in, judged afresh from now.
  const resumeAt = Math.min(inProgress?.step ?? 0, steps.length - 1);
  const taskId = `canary:${revision}`;
  // The pass after the start begins the step: its clock and figures start then. A canary set up
  // after the step in status began is one started again after a restart: that step begins anew.
  // A start that ended hands out its outcome here, once: a failure is reported below, not started over.
  const finished = deps.rollouts.take(key, taskId);
  let begun = live !== undefined && (!inProgress || live.since > Date.parse(inProgress.stepStartedAt));
  // A canary whose start still runs is not live yet, whatever the platform holds of it: on kube its
  // Deployment is written before its pods serve, and a step begun then would be judged before it served.
  if (!live || deps.rollouts.isRunning(key)) {
    const weight = steps[resumeAt] as number;
    const task =
      finished ??
      deps.rollouts.ensure(key, taskId, () => control.start(fn, input.build, input.deployOptions, weight));
    if (task.state === 'Running') {
      const message = `starting canary ${revision} beside ${serving} at ${weight}%`;
      input.setPhase('Deploying', input.readyWhileInProgress(), Reason.CanaryProgressing, message);
      if (task.started) deps.events?.record(fn, 'Normal', Reason.CanaryProgressing, message);
      return Done;
    }
    if (task.state === 'Failed') {
      if (!(task.error instanceof RolloutError)) throw task.error;
      status.lastError = task.error.message;
      deps.events?.record(fn, 'Warning', Reason.RolloutFailed, task.error.message);
      input.setPhase(
        'Failed',
        'False',
        Reason.RolloutFailed,
        `${task.error.message}; still serving ${serving}`,
      );
      throw new RecordedFailure(`canary of ${revision} failed to start: ${task.error.message}`, task.error);
    }
    live = control.live(namespace, name);
    // Rolled out at once after all (the serving revision was at zero): the next pass sees it serve.
    if (!live) return requeueAfter(CANARY_CHECK_MS);
    begun = true;
  }
  if (begun || !inProgress) {
    const weight = live.weight;
    // Without a step in status (its write was lost), the canary's own share says which step it is.
    const step = inProgress ? resumeAt : Math.max(steps.indexOf(weight), 0);
    deps.logger.info(
      { function: key, revision, step, weight, resumed: inProgress !== undefined },
      inProgress ? 'canary resumed after a restart' : 'canary step started',
    );
    status.canary = {
      revision,
      stableRevision: serving,
      phase: 'Progressing',
      step,
      weight,
      stepStartedAt: new Date().toISOString(),
      message: inProgress ? `resumed at step ${step + 1} of ${steps.length} after a restart` : undefined,
    };
    input.setPhase(
      'Deploying',
      input.readyWhileInProgress(),
      Reason.CanaryProgressing,
      progress(status.canary, steps),
    );
    return requeueAfter(CANARY_CHECK_MS);
  }
  const current: CanaryStatus = inProgress;
  const figures = live.figures;
  const decision = live.alive
    ? decideCanary(spec, current.step, Date.parse(current.stepStartedAt), figures, Date.now())
    : ({ action: 'rollBack', why: `its process exited (${describe(figures)})` } as const);
  switch (decision.action) {
    case 'hold': {
      status.canary = { ...current, figures: shown(figures) };
      input.setPhase(
        'Deploying',
        input.readyWhileInProgress(),
        Reason.CanaryProgressing,
        progress(status.canary, steps),
      );
      return requeueAfter(decision.afterMs);
    }
    case 'advance': {
      control.setWeight(namespace, name, decision.weight);
      status.canary = {
        ...current,
        step: decision.step,
        weight: decision.weight,
        stepStartedAt: new Date().toISOString(),
        figures: undefined,
        message: `step ${current.step + 1} passed: ${describe(figures)}`,
      };
      const message = progress(status.canary, steps);
      deps.logger.info(
        { function: key, revision, step: decision.step, weight: decision.weight },
        'canary step started',
      );
      deps.events?.record(fn, 'Normal', Reason.CanaryProgressing, message);
      input.setPhase('Deploying', input.readyWhileInProgress(), Reason.CanaryProgressing, message);
      return requeueAfter(CANARY_CHECK_MS);
    }
    case 'promote': {
      await control.promote(namespace, name);
      const message = `promoted ${revision} after ${steps.length} step(s); the last: ${describe(figures)}`;
      status.canary = { ...current, phase: 'Promoted', weight: 100, figures: shown(figures), message };
      deps.events?.record(fn, 'Normal', Reason.CanaryPromoted, message);
      return undefined;
    }
    case 'rollBack': {
      await control.abort(namespace, name);
      const message = `canary ${revision} rolled back at ${current.weight}% (step ${current.step + 1} of ${steps.length}): ${decision.why}`;
      status.canary = { ...current, phase: 'RolledBack', figures: shown(figures), message };
      status.lastError = message;
      deps.events?.record(fn, 'Warning', Reason.CanaryRolledBack, message);
      deps.logger.warn(
        { function: key, revision, figures },
        'canary rolled back; the previous revision serves',
      );
      throw rolledBack(status, message, serving);
    }
  }
}

/**
 * A rolled-back canary is stalled: the same code and settings would breach again, so nothing but a
 * new revision (a commit, a change of settings) moves it on, while the stable revision serves. Thrown,
 * the runtime writes not Ready, Reconciling done and Stalled, each with CanaryRolledBack, and does not
 * requeue.
 */
function rolledBack(status: FunctionStatus, message: string, serving: string): StalledError {
  status.phase = 'Failed';
  return new StalledError(Reason.CanaryRolledBack, message, {
    readyMessage: `${message}; still serving ${serving}`,
  });
}

function shown(figures: AnswerFigures): NonNullable<CanaryStatus['figures']> {
  return {
    requests: figures.requests,
    errors: figures.errors,
    errorRate: Math.round(errorRateOf(figures) * 10_000) / 10_000,
    ...(figures.p99Ms === undefined ? {} : { p99Ms: Math.round(figures.p99Ms * 10) / 10 }),
  };
}

function describe(figures: AnswerFigures): string {
  return `${figures.errors} of ${figures.requests} answers 5xx${figures.p99Ms === undefined ? '' : `, p99 ${Math.round(figures.p99Ms)} ms`}`;
}

function progress(canary: CanaryStatus, steps: readonly number[]): string {
  return `canary ${canary.revision}: ${canary.weight}% of requests (step ${canary.step + 1} of ${steps.length}) beside ${canary.stableRevision}`;
}
