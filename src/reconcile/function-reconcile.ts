/**
 * Brings one Function's workload to its desired revision. Whether to build is decided from durable
 * state (is there a successful build for this build key?), never from a phase another writer can
 * reset: the lesson of the seeds' 94 kaniko Jobs.
 */
import type { Logger } from 'pino';
import { type Condition, setCondition } from '../core/conditions.js';
import { asError, BuildError } from '../core/errors.js';
import type { Builder, ObjectStore, SourceSnapshot, WorkloadPlatform } from '../core/interfaces.js';
import { functionPath } from '../core/naming.js';
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
} from '../core/resources.js';
import type { ProcessQuota } from './process-quota.js';

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
}

export function revisionOf(buildKey: string, configHash: string, enabled: boolean): string {
  return `${buildKey.slice(0, 12)}-${configHash.slice(0, 8)}${enabled ? '' : '-off'}`;
}

export async function isFunctionEnabled(store: ObjectStore, fn: SlessFunction): Promise<boolean> {
  const triggers = (await store.list('Trigger', { namespace: fn.metadata.namespace })) as Trigger[];
  return !triggers.some((t) => t.spec.function === fn.metadata.name && t.spec.enabled === false);
}

export async function reconcileFunction(
  deps: FunctionReconcileDeps,
  namespace: string,
  name: string,
): Promise<void> {
  const fn = (await deps.store.get('Function', namespace, name)) as SlessFunction | undefined;
  if (!fn) {
    deps.processes?.release(namespace, name);
    await deps.platform.remove(namespace, name);
    return;
  }
  const annotations = fn.metadata.annotations ?? {};
  const buildKey = annotations[ANNOTATION_BUILD_KEY];
  const configHash = annotations[ANNOTATION_CONFIG_HASH];
  const commit = annotations[ANNOTATION_COMMIT];
  const key = `${namespace}/${name}`;
  const log = deps.logger.child({ function: key });
  const generation = fn.metadata.generation ?? 1;
  const status: FunctionStatus = { ...(fn.status ?? {}) };
  status.url = `${deps.externalUrl}${functionPath(namespace, name)}`;
  const setPhase = (phase: FunctionPhase, ready: Condition['status'], reason: string, message: string) => {
    status.phase = phase;
    status.observedGeneration = generation;
    status.conditions = setCondition(status.conditions, {
      type: 'Ready',
      status: ready,
      reason,
      message,
      observedGeneration: generation,
    });
    status.conditions = setCondition(status.conditions, {
      type: 'Reconciling',
      status: phase === 'Building' || phase === 'Deploying' ? 'True' : 'False',
      reason,
      message,
      observedGeneration: generation,
    });
  };
  const write = () => deps.store.patchStatus(fn, status);

  if (!buildKey || !configHash || !commit) {
    setPhase(
      'Failed',
      'False',
      'MissingAnnotations',
      `Function was not applied by a GitSource (needs ${LABEL_SOURCE} and build annotations)`,
    );
    await write();
    return;
  }
  status.commit = commit;
  status.shortCommit = commit.slice(0, 12);
  status.buildKey = buildKey;

  let build = await deps.builder.lookup(fn, buildKey);
  if (!build) {
    const remembered = deps.failedBuilds.get(key);
    const failed =
      remembered?.buildKey === buildKey ? remembered : await deps.builder.lookupFailed?.(fn, buildKey);
    if (failed && failed.buildKey === buildKey) {
      status.lastBuild = failed;
      const failure = failureOf(failed, `build ${buildKey.slice(0, 12)} failed: ${failed.message}`);
      setPhase(
        'Failed',
        (await deps.platform.currentRevision(namespace, name)) ? 'True' : 'False',
        failure.reason,
        await servingNote(deps, fn, failure.message),
      );
      await write();
      return;
    }
    setPhase(
      'Building',
      status.servingRevision ? 'True' : 'False',
      'Building',
      `building ${buildKey.slice(0, 12)} at ${commit.slice(0, 12)}`,
    );
    status.lastBuild = { buildKey, commit, result: 'Running', startedAt: new Date().toISOString() };
    await write();
    deps.onBuildStarted?.(fn);
    try {
      const { snapshot, manifestFiles } = await deps.snapshotFor(fn);
      build = await deps.builder.build({
        fn,
        buildKey,
        commit,
        codeDir: annotations[ANNOTATION_CODE_DIR] ?? '',
        excludedFiles: manifestFiles,
        snapshot,
      });
      deps.failedBuilds.delete(key);
    } catch (thrown) {
      const error = asError(thrown);
      const record: BuildRecord = (thrown as { record?: BuildRecord }).record ?? {
        buildKey,
        commit,
        result: 'Failed',
        startedAt: status.lastBuild.startedAt,
        finishedAt: new Date().toISOString(),
        message: error.message,
        logTail: error instanceof BuildError ? error.logTail : '',
      };
      deps.failedBuilds.set(key, record);
      status.lastBuild = record;
      status.lastError = error.message;
      log.warn({ err: error.message }, 'build failed; the previous revision keeps serving');
      // Worded as the remembered failure above words it, so the report reads the same on every pass.
      const failure = failureOf(record, `build ${buildKey.slice(0, 12)} failed: ${error.message}`);
      setPhase(
        'Failed',
        (await deps.platform.currentRevision(namespace, name)) ? 'True' : 'False',
        failure.reason,
        await servingNote(deps, fn, failure.message),
      );
      await write();
      return;
    }
  }
  status.lastBuild = build;
  status.lastBuiltAt = build.finishedAt;
  status.image = build.image;

  const enabled = await isFunctionEnabled(deps.store, fn);
  const revision = revisionOf(buildKey, configHash, enabled);
  // The build is kept either way: once the namespace has room, the function starts without one.
  let refusal: string | undefined;
  if (enabled) refusal = deps.processes?.admit(fn);
  else deps.processes?.release(namespace, name);
  if (refusal) {
    status.lastError = refusal;
    setPhase(
      'Failed',
      (await deps.platform.currentRevision(namespace, name)) ? 'True' : 'False',
      'QuotaExceeded',
      await servingNote(deps, fn, refusal),
    );
    await write();
    return;
  }
  if ((await deps.platform.currentRevision(namespace, name)) !== revision) {
    setPhase('Deploying', status.servingRevision ? 'True' : 'False', 'Deploying', `rolling out ${revision}`);
    await write();
    try {
      await deps.platform.deploy(fn, build, { revision, enabled });
      status.restarts = 0;
    } catch (thrown) {
      const error = asError(thrown);
      status.lastError = error.message;
      log.warn({ err: error.message }, 'rollout failed; the previous revision keeps serving');
      if (!(await deps.platform.currentRevision(namespace, name))) deps.processes?.release(namespace, name);
      setPhase(
        'Failed',
        (await deps.platform.currentRevision(namespace, name)) ? 'True' : 'False',
        'RolloutFailed',
        await servingNote(deps, fn, error.message),
      );
      await write();
      return;
    }
  }
  status.servingRevision = revision;
  status.servingCommit = build.commit;
  delete status.lastError;
  if (enabled)
    setPhase('Ready', 'True', 'Serving', `serving ${revision} (built at ${build.commit.slice(0, 12)})`);
  else setPhase('Disabled', 'False', 'Disabled', 'a trigger disabled this function (enabled: false)');
  await write();
}

/** A build the code security gate refused says so in its own words; other failures are build failures. */
function failureOf(record: BuildRecord, buildFailed: string): { reason: string; message: string } {
  if (record.codeCheck?.result === 'Refused')
    return { reason: 'CodeValidationFailed', message: record.message ?? 'code validation failed' };
  return { reason: 'BuildFailed', message: buildFailed };
}

async function servingNote(deps: FunctionReconcileDeps, fn: SlessFunction, message: string): Promise<string> {
  const serving = await deps.platform.currentRevision(fn.metadata.namespace, fn.metadata.name);
  return serving ? `${message}; still serving ${serving}` : message;
}
