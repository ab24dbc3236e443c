/**
 * Fakes for the reconcilers' unit tests: what the builder, platform, scheduler, job runner and
 * source reader do is under the test's control; the reconciler is what is under test.
 */
import { pino } from 'pino';
import { RecordedFailure } from '../../src/core/errors.js';
import type {
  Builder,
  JobOutcome,
  JobRunner,
  SourceReader,
  SourceSnapshot,
  TreeFile,
  TriggerScheduler,
} from '../../src/core/interfaces.js';
import { isWithin } from '../../src/core/paths.js';
import type { BuildRecord, FunctionStatus, SlessFunction, TriggerStatus } from '../../src/core/resources.js';
import type { StatusUpdate } from '../../src/core/status.js';
import {
  type FunctionReconcileDeps,
  finalizeFunction,
  reconcileFunction,
} from '../../src/reconcile/function/reconciler.js';
import { InFlight } from '../../src/reconcile/runtime/in-flight.js';
import { objectRef } from '../../src/reconcile/runtime/object-ref.js';
import { reconcileAndPatch } from '../../src/reconcile/runtime/patch.js';

export const silentLogger = pino({ level: 'silent' });

export const buildRecord = (buildKey: string, commit = 'c'.repeat(40)): BuildRecord => ({
  buildKey,
  commit,
  result: 'Succeeded',
  startedAt: 't0',
  finishedAt: 't1',
});

/** A Function named `name` in `ns` with the given annotations (what a GitSource applies). */
export function functionResource(
  name: string,
  annotations: Record<string, string> = {},
  labels: Record<string, string> = { 'sless.dev/source': 'repo' },
): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name, namespace: 'ns', labels, annotations },
    spec: { runtime: 'nodejs20', entrypoint: 'h.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  };
}

/** Builds exist only for the keys given; building is not expected of the caller. */
export function builderWith(keys: string[]): Builder {
  return {
    lookup: async (_fn, key) => (keys.includes(key) ? buildRecord(key) : undefined),
    build: async () => {
      throw new Error('this reconciler never builds');
    },
  };
}

/** Records every run as `job#runId@buildKey` and ends it as `outcome` says (or throws it). */
export function recordingRunner(
  outcome: JobOutcome | Error = { phase: 'Succeeded', startTime: 't1', completionTime: 't2', exitCode: 0 },
): JobRunner & { runs: string[] } {
  const runs: string[] = [];
  return {
    runs,
    run: async (job, _fn, build) => {
      runs.push(`${job.metadata.name}#${job.spec.runId}@${build.buildKey}`);
      if (outcome instanceof Error) throw outcome;
      return outcome;
    },
  };
}

/** Records applies and removals; apply returns `fields` or throws them when an Error. */
export function recordingScheduler(
  fields: TriggerStatus | Error = {},
): TriggerScheduler & { applied: string[]; removed: string[] } {
  const applied: string[] = [];
  const removed: string[] = [];
  return {
    applied,
    removed,
    apply: async (trigger) => {
      applied.push(trigger.metadata.name);
      if (fields instanceof Error) throw fields;
      return fields;
    },
    remove: async (_namespace, name) => {
      removed.push(name);
    },
  };
}

/** A snapshot over an in-memory tree: the manifest loader only needs listFiles and readFile. */
export function snapshotOf(files: Record<string, string>, commit = 'c'.repeat(40)): SourceSnapshot {
  const entries: TreeFile[] = Object.keys(files)
    .sort()
    .map((path) => ({ path, mode: '100644', oid: `${commit}:${path}` }));
  return {
    commit,
    listFiles: async (dir) => entries.filter((e) => isWithin(dir, e.path)),
    readFile: async (path) => new TextEncoder().encode(files[path] ?? ''),
  };
}

/**
 * A reader whose branch head is `head` (or which throws it), holding `files` at every commit;
 * `onBranch` lists the commits of the branch besides the head (or throws).
 */
export function readerOf(options: {
  head: string | Error;
  files?: Record<string, string>;
  onBranch?: string[] | Error;
}): SourceReader & { snapshots: string[] } {
  const snapshots: string[] = [];
  return {
    snapshots,
    resolveHead: async () => {
      if (options.head instanceof Error) throw options.head;
      return options.head;
    },
    snapshot: async (commit) => {
      snapshots.push(commit);
      return snapshotOf(options.files ?? {}, commit);
    },
    isOnBranch: async (commit, head) => {
      if (options.onBranch instanceof Error) throw options.onBranch;
      return commit === head || (options.onBranch ?? []).includes(commit);
    },
  };
}

/**
 * Reconciles one Function as the controller does, pass after pass: a build or rollout a pass starts
 * runs in the background, and its end brings the next pass, which takes its outcome. Ends when a pass
 * starts nothing more; a pass that throws ends it with that error, unless `retries` allows the work
 * queue's retry of a failure that is not recorded (a real API server's 504 under load). `deps` lacks
 * only the trackers.
 */
export async function reconcileUntilQuiet(
  deps: Omit<FunctionReconcileDeps, 'builds' | 'rollouts'>,
  namespace: string,
  name: string,
  options: { retries?: number } = {},
): Promise<{ passes: number }> {
  let retries = options.retries ?? 0;
  let queued = 0;
  const full: FunctionReconcileDeps = {
    ...deps,
    builds: new InFlight<BuildRecord>(() => queued++),
    rollouts: new InFlight<void>(() => queued++, { rerunWhenAskedAgain: true }),
  };
  for (let passes = 1; ; passes++) {
    queued = 0;
    const failed = await reconcileAndPatch({
      store: deps.store,
      logger: deps.logger,
      ref: objectRef('Function', namespace, name),
      retryDelayMs: () => 1000,
      reconcile: (fn: SlessFunction, update: StatusUpdate<FunctionStatus>) =>
        reconcileFunction(full, fn, update),
      finalize: () => finalizeFunction(full, namespace, name),
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (failed !== undefined) {
      if (failed instanceof RecordedFailure || retries-- <= 0) throw failed;
      await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    if (full.builds.size === 0 && full.rollouts.size === 0 && queued === 0) return { passes };
    await full.builds.idle();
    await full.rollouts.idle();
  }
}
