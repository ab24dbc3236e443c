/**
 * Brings one Function's workload to its desired revision, one step per run: it fills the status
 * update the reconcile runtime writes once, and returns instead of waiting. A build or a rollout it
 * needs is started in the background (InFlight) and ends by queueing the function again, so no worker
 * waits on either. Whether to build is decided from durable state (is there a successful build for
 * this build key?), never from a phase another writer can reset: a status write that raced the
 * controller once made 94 kaniko Jobs of one function.
 */

import type { Logger } from 'pino';
import type { ConditionStatus } from '../../core/conditions.js';
import { BuildFailedError, RecordedFailure, RolloutError } from '../../core/errors.js';
import type {
  Builder,
  EventRecorder,
  FunctionLeftovers,
  ObjectStore,
  SourceSnapshot,
  WorkloadPlatform,
} from '../../core/interfaces.js';
import { functionPath } from '../../core/naming.js';
import { objectKey } from '../../core/object-key.js';
import { buildOwnerOf } from '../../core/previews.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_CODE_DIR,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  type BuildRecord,
  type FunctionPhase,
  type FunctionStatus,
  LABEL_SOURCE,
  type SlessFunction,
  type Trigger,
} from '../../core/resources.js';
import { endOfLifeWarning } from '../../core/runtimes.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import type { SecretReader } from '../../secrets/references.js';
import type { ProcessQuota } from '../process-quota.js';
import { StalledError, WaitingError } from '../runtime/errors.js';
import type { InFlight } from '../runtime/in-flight.js';
import { Done, type Result } from '../runtime/patch.js';
import { canaryStep } from './canary-step.js';
import { secretsStep } from './secrets-step.js';

export interface FunctionReconcileDeps {
  store: ObjectStore;
  builder: Builder;
  platform: WorkloadPlatform;
  logger: Logger;
  externalUrl: string;
  /** The snapshot of a source at a commit, plus the manifest files to leave out of builds. */
  snapshotFor(fn: SlessFunction): Promise<{ snapshot: SourceSnapshot; manifestFiles: ReadonlySet<string> }>;
  /** Build keys that failed, per function; a failed key is retried only on request. */
  failedBuilds: Map<string, BuildRecord>;
  onBuildStarted?: (fn: SlessFunction) => void;
  /** The running-process limit of each namespace; no limit when omitted. */
  processes?: ProcessQuota;
  events?: EventRecorder;
  /** Builds running in the background, one per function, keyed `namespace/name`, by build key. */
  builds: InFlight<BuildRecord>;
  /** Rollouts running in the background, one per function, keyed `namespace/name`, by revision. */
  rollouts: InFlight<void>;
  /** Runs a build when a build slot is free, fairly between namespaces (all at once when omitted). */
  buildSlot?: <T>(fn: SlessFunction, work: () => Promise<T>) => Promise<T>;
  /** Secrets of the functions' namespaces (read to check references and hash them; never copied). */
  secrets?: SecretReader;
  /** What a deleted Function leaves beyond its workload; nothing when omitted. */
  leftovers?: FunctionLeftovers;
}

/** A function waiting for a secret looks again this often, besides the secret's own events. */
export const SECRET_RECHECK_MS = 60_000;

export function revisionOf(buildKey: string, configHash: string, enabled: boolean): string {
  return `${buildKey.slice(0, 12)}-${configHash.slice(0, 8)}${enabled ? '' : '-off'}`;
}

/**
 * From the store's watch cache where it keeps one (a Trigger that disables the function and is not
 * there yet queues the function again with its own event), else a list of the namespace's Triggers.
 */
export async function isFunctionEnabled(store: ObjectStore, fn: SlessFunction): Promise<boolean> {
  const disables = (t: Trigger) =>
    t.metadata.namespace === fn.metadata.namespace &&
    t.spec.function === fn.metadata.name &&
    t.spec.enabled === false &&
    // A disabled queue trigger pauses its consumer only; the function serves on.
    t.spec.type !== 'amqp';
  const triggers =
    store.cached?.('Trigger', disables) ??
    (await store.list('Trigger', { namespace: fn.metadata.namespace }));
  return !triggers.some(disables);
}

/**
 * The Function is gone, or being deleted: what ran it goes, then what it left (builds), then the
 * finalizer, so a step that fails keeps the finalizer and the whole pass runs again. Every step is
 * idempotent: the pass also runs once more when the object is finally gone.
 */
export async function finalizeFunction(
  deps: FunctionReconcileDeps,
  namespace: string,
  name: string,
): Promise<void> {
  deps.processes?.release(namespace, name);
  await deps.platform.remove(namespace, name);
  await deps.leftovers?.remove(namespace, name);
  await deps.store.releaseFinalizer?.('Function', namespace, name);
}

export async function reconcileFunction(
  deps: FunctionReconcileDeps,
  fn: SlessFunction,
  update: StatusUpdate<FunctionStatus>,
): Promise<Result> {
  const { namespace, name } = fn.metadata;
  const annotations = fn.metadata.annotations ?? {};
  const buildKey = annotations[ANNOTATION_BUILD_KEY];
  const configHash = annotations[ANNOTATION_CONFIG_HASH];
  const commit = annotations[ANNOTATION_COMMIT];
  const key = objectKey(namespace, name);
  const log = deps.logger.child({ function: key });
  const status = update.status;
  status.url = `${deps.externalUrl}${functionPath(namespace, name)}`;
  // A runtime past its end of life still builds and serves: said in status, never as a failure.
  const eol = endOfLifeWarning(fn.spec.runtime, new Date().toISOString().slice(0, 10));
  if (eol) status.warnings = [eol];
  else delete status.warnings;
  /** A pass that ends here, not stalled: a stall is thrown (`stalled` below) and the runtime writes it. */
  const setPhase = (phase: FunctionPhase, ready: ConditionStatus, reason: Reason, message: string) => {
    status.phase = phase;
    update.set('Ready', ready, reason, message);
    update.set('Reconciling', phase === 'Building' || phase === 'Deploying', reason, message);
    update.remove('Stalled');
  };
  /**
   * The desired revision cannot come by waiting (its build failed, or the namespace has no room):
   * thrown, the runtime writes not Ready, whatever still serves, and Stalled, so `kubectl wait
   * --for=condition=Ready` and kstatus report the push as failed instead of done, and does not
   * requeue. Ready's message names what still serves.
   */
  const stalled = async (reason: Reason, message: string) => {
    status.phase = 'Failed';
    return new StalledError(reason, message, { readyMessage: await servingNote(deps, fn, message) });
  };
  // Ready says whether the revision this Function asks for serves. While a new one builds or rolls
  // out, the one that served keeps Ready as it was; once a revision failed, nothing but the desired
  // revision serving makes the Function Ready again (a retry of the failed rollout does not).
  const readyWhileInProgress = (): ConditionStatus =>
    status.servingRevision && update.get('Ready')?.status === 'True' ? 'True' : 'False';

  if (!buildKey || !configHash || !commit) {
    setPhase(
      'Failed',
      'False',
      Reason.MissingAnnotations,
      `Function was not applied by a GitSource (needs ${LABEL_SOURCE} and build annotations)`,
    );
    return Done;
  }
  status.commit = commit;
  status.shortCommit = commit.slice(0, 12);
  status.buildKey = buildKey;

  // A build this controller ran says how it ended first, in its own words.
  let finished = deps.builds.take(key, buildKey);
  // A branch preview's builds are its main Function's (shared by build key, on both platforms).
  const builtAs = buildOwnerOf(fn);
  let build = finished?.state === 'Succeeded' ? finished.value : await deps.builder.lookup(builtAs, buildKey);
  if (build && finished?.state !== 'Succeeded') deps.builds.forget(key);
  else {
    if (!finished) {
      const remembered = deps.failedBuilds.get(key);
      const failed =
        remembered?.buildKey === buildKey ? remembered : await deps.builder.lookupFailed?.(builtAs, buildKey);
      if (failed && failed.buildKey === buildKey) {
        status.lastBuild = failed;
        const failure = failureOf(failed, `build ${buildKey.slice(0, 12)} failed: ${failed.message}`);
        throw await stalled(failure.reason, failure.message);
      }
      const building = `building ${buildKey.slice(0, 12)} at ${commit.slice(0, 12)}`;
      const started = new Date().toISOString();
      const task = deps.builds.ensure(key, buildKey, async (note) => {
        const { snapshot, manifestFiles } = await deps.snapshotFor(fn);
        const request = {
          fn: builtAs,
          buildKey,
          commit,
          codeDir: annotations[ANNOTATION_CODE_DIR] ?? '',
          excludedFiles: manifestFiles,
          snapshot,
          onProgress: note,
        };
        return deps.buildSlot
          ? deps.buildSlot(fn, () => deps.builder.build(request))
          : deps.builder.build(request);
      });
      if (task.state === 'Running') {
        // What holds the build, when something does: each change of it queues the function again.
        const held = deps.builds.noteOf(key);
        setPhase(
          'Building',
          readyWhileInProgress(),
          Reason.Building,
          held ? `${building}: ${held}` : building,
        );
        if (task.started || status.lastBuild?.buildKey !== buildKey || status.lastBuild.result !== 'Running')
          status.lastBuild = { buildKey, commit, result: 'Running', startedAt: started };
        if (task.started) {
          deps.onBuildStarted?.(fn);
          deps.events?.record(fn, 'Normal', Reason.Building, building);
        }
        // The build's end queues this function again.
        return Done;
      }
      finished = task;
    }
    if (finished.state === 'Failed') {
      // Anything but a verdict on the code (the source or storage failing for a moment) goes back to
      // the work queue, which retries with backoff; the runtime records the retry in status.
      if (!(finished.error instanceof BuildFailedError)) throw finished.error;
      const error = finished.error;
      const record = error.record;
      deps.failedBuilds.set(key, record);
      deps.events?.record(
        fn,
        'Warning',
        Reason.BuildFailed,
        `build ${buildKey.slice(0, 12)} failed: ${record.message ?? ''}`,
      );
      status.lastBuild = record;
      status.lastError = error.message;
      log.warn({ err: error.message }, 'build failed; the previous revision keeps serving');
      // Worded as the remembered failure above words it, so the report reads the same on every pass.
      const failure = failureOf(record, `build ${buildKey.slice(0, 12)} failed: ${error.message}`);
      throw await stalled(failure.reason, failure.message);
    }
    build = finished.value;
    deps.failedBuilds.delete(key);
    deps.events?.record(
      fn,
      'Normal',
      Reason.BuildSucceeded,
      `built ${buildKey.slice(0, 12)} at ${commit.slice(0, 12)}${build.image ? `: ${build.image}` : ''}`,
    );
  }
  status.lastBuild = build;
  status.lastBuiltAt = build.finishedAt;
  status.image = build.image;

  const enabled = await isFunctionEnabled(deps.store, fn);
  // A missing secret stops here: nothing is rolled, so what served keeps serving, and no process or
  // pod crash-loops on it. A change of the secret queues the function again; thrown, the runtime
  // writes the wait (Reconciling, not Stalled) and looks again after SECRET_RECHECK_MS.
  const secrets = await secretsStep(deps, fn, enabled);
  if (!secrets.ok) {
    status.phase = 'Failed';
    status.lastError = secrets.message;
    const previous = update.get('Ready');
    if (previous?.reason !== Reason.SecretNotFound || !previous.message.startsWith(secrets.message))
      deps.events?.record(fn, 'Warning', Reason.SecretNotFound, secrets.message);
    throw new WaitingError(Reason.SecretNotFound, secrets.message, SECRET_RECHECK_MS, {
      readyMessage: await servingNote(deps, fn, secrets.message),
    });
  }
  // The values' hash is part of the revision: a rotation rolls the function, with no rebuild.
  const revision = revisionOf(
    buildKey,
    secrets.configHash ? secrets.configHash(configHash) : configHash,
    enabled,
  );
  const deployOptions = { revision, enabled, ...(secrets.hash ? { secretsHash: secrets.hash } : {}) };
  // The build is kept either way: once the namespace has room, the function starts without one.
  let refusal: string | undefined;
  if (enabled) refusal = deps.processes?.admit(fn);
  else deps.processes?.release(namespace, name);
  if (refusal) {
    status.lastError = refusal;
    throw await stalled(Reason.QuotaExceeded, refusal);
  }
  // Under `spec.rollout.canary`, a new revision first takes a share of requests beside the old one.
  const canary = await canaryStep(deps, {
    fn,
    build,
    revision,
    enabled,
    deployOptions,
    update,
    setPhase,
    readyWhileInProgress,
  });
  if (canary) return canary;
  // A rollout this controller ran says how it ended first: on kube the Deployment names the new
  // revision as soon as it is applied, before the revision is available, so "rolled out" alone does
  // not mean it served.
  let rollout = deps.rollouts.take(key, revision);
  if (!rollout) {
    const rolledOut = (await deps.platform.currentRevision(namespace, name)) === revision;
    if (!rolledOut || deps.platform.ensure) {
      const ready = build;
      // Rolled out already: put back what was changed or deleted by hand, and wait until it serves.
      const task = deps.rollouts.ensure(key, revision, () =>
        rolledOut
          ? (deps.platform.ensure?.(fn, ready, deployOptions) ?? Promise.resolve())
          : deps.platform.deploy(fn, ready, deployOptions),
      );
      if (task.state === 'Running') {
        if (!rolledOut) {
          setPhase('Deploying', readyWhileInProgress(), Reason.Deploying, `rolling out ${revision}`);
          if (task.started) deps.events?.record(fn, 'Normal', Reason.Deploying, `rolling out ${revision}`);
        }
        // The rollout's end queues this function again.
        return Done;
      }
      rollout = task;
    }
  }
  if (rollout?.state === 'Failed') {
    // The API failing for a moment is not a failed revision: the work queue retries it.
    if (!(rollout.error instanceof RolloutError)) throw rollout.error;
    const error = rollout.error;
    status.lastError = error.message;
    log.warn({ err: error.message }, 'rollout failed; the previous revision keeps serving');
    if (!(await deps.platform.currentRevision(namespace, name))) deps.processes?.release(namespace, name);
    deps.events?.record(fn, 'Warning', Reason.RolloutFailed, error.message);
    // What served last is what status recorded as serving, not what the platform was told to roll.
    // It keeps serving /fn/ (the route follows servingRevision, not Ready), but the Function is not
    // Ready: the revision it asks for does not serve.
    const serving = status.servingRevision;
    setPhase(
      'Failed',
      'False',
      Reason.RolloutFailed,
      serving && serving !== revision ? `${error.message}; still serving ${serving}` : error.message,
    );
    // A revision that did not start may start later (an image pull that failed, a dependency
    // that was down): retried with backoff, like a crash-looping container.
    throw new RecordedFailure(`rollout of ${revision} failed: ${error.message}`, error);
  }
  if (rollout?.state === 'Succeeded' && status.servingRevision !== revision) status.restarts = 0;
  if (status.servingRevision !== revision)
    deps.events?.record(
      fn,
      'Normal',
      Reason.Serving,
      `serving ${revision} (built at ${build.commit.slice(0, 12)})`,
    );
  status.servingRevision = revision;
  status.servingCommit = build.commit;
  // Undefined, not deleted: status is written as a merge, where a missing key keeps its old value.
  status.lastError = undefined;
  // What the platform saw of the revision since it rolled out: its crashes, how it is held in.
  const seen = deps.platform.observe?.(fn);
  if (seen) {
    if (seen.restarts !== undefined) status.restarts = seen.restarts;
    if (seen.instances) status.instances = { desired: seen.instances.desired, ready: seen.instances.ready };
    if (seen.lastCrash) status.lastError = seen.lastCrash;
    if (seen.isolation) status.isolation = seen.isolation;
  }
  // Undefined where the platform does not report it or the function does not scale to zero.
  const atZero = enabled ? await deps.platform.scaledToZero?.(fn) : undefined;
  const serving = `serving ${revision} (built at ${build.commit.slice(0, 12)})`;
  if (!enabled)
    setPhase('Disabled', 'False', Reason.Disabled, 'a trigger disabled this function (enabled: false)');
  else if (atZero) {
    // Still Ready: the next request starts it (`kubectl wait --for=condition=Ready` holds).
    setPhase(
      'ScaledToZero',
      'True',
      Reason.ScaledToZero,
      `${serving}; scaled to zero, the next request starts it`,
    );
    update.set('ScaledToZero', 'True', Reason.ScaledToZero, 'nothing runs until the next request');
  } else {
    setPhase('Ready', 'True', Reason.Serving, serving);
    if (atZero === false) update.set('ScaledToZero', 'False', Reason.Serving, 'running');
  }
  if (atZero === undefined) update.remove('ScaledToZero');
  return Done;
}

/** A build the code security gate refused says so in its own words; other failures are build failures. */
function failureOf(record: BuildRecord, buildFailed: string): { reason: Reason; message: string } {
  if (record.codeCheck?.result === 'Refused')
    return { reason: Reason.CodeValidationFailed, message: record.message ?? 'code validation failed' };
  return { reason: Reason.BuildFailed, message: buildFailed };
}

async function servingNote(deps: FunctionReconcileDeps, fn: SlessFunction, message: string): Promise<string> {
  const serving = await deps.platform.currentRevision(fn.metadata.namespace, fn.metadata.name);
  return serving ? `${message}; still serving ${serving}` : message;
}
