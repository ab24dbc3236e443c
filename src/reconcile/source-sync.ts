/**
 * One sync of one GitSource, as a list of small steps (Flux's source-controller shape): resolve the
 * head, read manifests, plan, apply, prune. The reconcile runtime writes status once at the end, and
 * turns a commit that cannot be served into Stalled from the typed error the steps throw.
 */
import type { Logger } from 'pino';
import { branchOf } from '../core/defaults.js';
import { parseDuration } from '../core/duration.js';
import { asError, formatIssue, SlessError } from '../core/errors.js';
import type { ObjectStore, SourceReader } from '../core/interfaces.js';
import {
  type AnyResource,
  type GitSource,
  type GitSourceStatus,
  LABEL_SOURCE,
  pinnedCommitOf,
  refKey,
  refOf,
} from '../core/resources.js';
import { Reason, type StatusUpdate } from '../core/status.js';
import type { ParsedManifestCache } from '../manifest/load.js';
import type { RepoSecrets } from '../secrets/repo-secrets.js';
import { applyPlan } from './apply-plan.js';
import { loadCommitManifests, planCommit } from './load-commit.js';
import type { BuildKeyCache, Plan } from './plan.js';
import { syncPreviews } from './preview-sync.js';
import { StalledError } from './runtime/errors.js';
import { objectRef } from './runtime/object-ref.js';
import { Done, patchOnce } from './runtime/patch.js';

export interface SyncResult {
  outcome: 'synced' | 'unchanged' | 'invalid' | 'failed' | 'suspended';
  commit?: string;
  plan?: Plan;
  /** Why a sync failed, as the `Reason` its source's Ready condition carries. */
  reason?: Reason;
  message?: string;
  /** Objects this sync pruned, as `Kind/name`. */
  pruned?: string[];
}

export interface SyncDeps {
  store: ObjectStore;
  logger: Logger;
  /** Functions a namespace may hold across its sources; no limit when omitted. */
  maxFunctions?: number;
  /** Told the plan just before it is applied. */
  planned?: (plan: Plan) => void;
  /** Parsed manifests by blob id, kept across syncs. */
  manifests?: ParsedManifestCache;
  /** Build keys by their inputs, kept across syncs. */
  buildKeys?: BuildKeyCache;
  /** SOPS Secret files: decrypted with the operator's key; one that will not is a manifest issue. */
  repoSecrets?: RepoSecrets;
}

export async function syncSource(
  deps: SyncDeps,
  source: GitSource,
  reader: SourceReader,
  options: { force?: boolean } = {},
): Promise<SyncResult> {
  let result: SyncResult | undefined;
  await patchOnce<'GitSource', GitSource, GitSourceStatus>(
    {
      store: deps.store,
      logger: deps.logger,
      ref: objectRef('GitSource', source.metadata.namespace, source.metadata.name),
      // Unused while every step's failure is said in status below; were one to escape, the next
      // poll is its retry.
      retryDelayMs: () => parseDuration(source.spec.interval ?? '1m'),
      reconcile: async (_source, update) => {
        try {
          result = await syncSteps(deps, source, reader, update, options);
          if (result.outcome !== 'suspended') {
            const previews = await syncPreviews(deps, source, reader, update.status, options);
            if (previews.pruned.length > 0) result.pruned = [...(result.pruned ?? []), ...previews.pruned];
          }
        } catch (thrown) {
          // A commit that cannot be served as it is: the runtime writes the stall, the caller hears it as invalid.
          if (thrown instanceof StalledError)
            result = {
              outcome: 'invalid',
              commit: update.status.lastAttemptedCommit,
              message: thrown.message,
            };
          throw thrown;
        }
        return Done;
      },
    },
    source,
  );
  if (!result) throw new Error(`sync of source ${refKey(refOf(source))} ended without an outcome`);
  return result;
}

/**
 * The steps of one sync, filling `update` (written once by the runtime). A commit that retrying
 * cannot serve (its manifests rejected, a pin off the branch, past the quota) is thrown as a
 * StalledError, and the runtime's summary writes Ready, Reconciling and Stalled from it; anything
 * else that fails is said in Ready and returned, and the next poll tries again.
 */
async function syncSteps(
  deps: SyncDeps,
  source: GitSource,
  reader: SourceReader,
  update: StatusUpdate<GitSourceStatus>,
  options: { force?: boolean },
): Promise<SyncResult> {
  const status = update.status;
  const generation = update.generation;
  const condition = (type: 'Ready', ok: boolean, reason: Reason, message: string) =>
    update.set(type, ok, reason, message);
  const finish = (result: SyncResult) => {
    status.phase = readyPhase(status);
    return result;
  };
  /** Stalled stays until a new commit or spec: Ready says what still serves, Stalled why. */
  const stall = (reason: Reason, message: string, readyMessage: string) => {
    status.phase = 'Failed';
    return new StalledError(reason, message, { readyMessage });
  };
  /** What a stall leaves behind once the source serves what it asks for. */
  const unstall = () => update.remove('Stalled').remove('Reconciling');

  if (source.spec.suspend) {
    condition(
      'Ready',
      status.lastSyncedCommit !== undefined,
      Reason.Suspended,
      'reconciliation is suspended',
    );
    return finish({ outcome: 'suspended' });
  }

  let head: string;
  try {
    head = await reader.resolveHead();
  } catch (thrown) {
    const error = asError(thrown);
    const reason = error instanceof SlessError ? error.reason : Reason.SourceFailed;
    condition('Ready', false, reason, error.message);
    deps.logger.warn(
      { source: source.metadata.name, reason, err: error.message },
      'cannot resolve the branch head',
    );
    return finish({ outcome: 'failed', reason, message: error.message });
  }

  // A pin (spec.ref.commit) replaces the head as what is served; it must be a commit of the branch.
  const pinned = pinnedCommitOf(source);
  const target = pinned ?? head;
  const unchanged =
    target === status.lastSyncedCommit && status.observedGeneration === generation && !options.force;
  // A commit whose manifests were rejected stays rejected; re-reading it on every poll helps nobody.
  const stalled = status.conditions?.some((c) => c.type === 'Stalled' && c.status === 'True') ?? false;
  const alreadyRejected =
    stalled &&
    target === status.lastAttemptedCommit &&
    status.observedGeneration === generation &&
    !options.force;
  if (alreadyRejected) return { outcome: 'unchanged', commit: target };
  if (unchanged) {
    // What was applied at this commit is still what runs. An error since then (the branch gone for a
    // while, the server unreachable) or a rejected commit that the branch moved back from is over:
    // say so, or the status would keep the error until the next commit.
    const ready = update.get('Ready');
    if (ready?.status === 'True' && ready.reason === Reason.Synced && !stalled)
      return { outcome: 'unchanged', commit: target };
    unstall();
    status.lastAttemptedCommit = target;
    condition('Ready', true, Reason.Synced, syncedMessage(status.objects ?? 0, target));
    deps.logger.info({ source: source.metadata.name, commit: target.slice(0, 12) }, 'source recovered');
    return finish({ outcome: 'unchanged', commit: target });
  }

  status.lastAttemptedCommit = target;
  // Undefined, not deleted: status is written as a merge, where only an explicit absence removes a field.
  status.pinnedCommit = pinned;
  if (pinned) {
    const problem = await pinProblem(reader, source, pinned, head);
    if (problem) {
      const serving = status.lastSyncedCommit
        ? `still serving ${status.lastSyncedCommit.slice(0, 12)}`
        : 'nothing applied';
      deps.logger.warn({ source: source.metadata.name, pinned }, problem.message);
      throw stall(problem.reason, problem.message, `${problem.message}; ${serving}`);
    }
  }
  head = target;
  try {
    const snapshot = await reader.snapshot(head);
    const loaded = await loadCommitManifests(deps, source, snapshot);
    const secrets = await deps.repoSecrets?.load(snapshot, source);
    if (secrets) {
      loaded.issues.push(...secrets.issues);
      for (const file of secrets.files) loaded.manifestFiles.add(file);
    }
    if (loaded.issues.length > 0) {
      const message = loaded.issues.map(formatIssue).join('; ');
      deps.logger.warn(
        { source: source.metadata.name, commit: head, issues: loaded.issues.length },
        `manifests rejected: ${message}`,
      );
      throw stall(
        Reason.ValidationFailed,
        message,
        `commit ${head.slice(0, 12)} rejected, ${status.lastSyncedCommit ? `still serving ${status.lastSyncedCommit.slice(0, 12)}` : 'nothing applied'}: ${message}`,
      );
    }
    // One list of the namespace's Functions serves the quota check and the apply below.
    const functions = await deps.store.list('Function', { namespace: source.metadata.namespace });
    const quotaProblem = functionQuotaProblem(deps, source, loaded.documents, functions);
    if (quotaProblem) {
      deps.logger.warn({ source: source.metadata.name, commit: head }, quotaProblem);
      throw stall(
        Reason.QuotaExceeded,
        quotaProblem,
        `commit ${head.slice(0, 12)} rejected, nothing of it applied: ${quotaProblem}`,
      );
    }
    const plan = await planCommit(deps, source, snapshot, loaded);
    // Before the functions that reference them, so none waits on a secret that is coming.
    if (secrets) await deps.repoSecrets?.apply(source, secrets.secrets);
    const prunedNames: string[] = [];
    const applied = await applyPlan(
      deps.store,
      source,
      plan,
      (kind, name) => prunedNames.push(`${kind}/${name}`),
      functions,
    );
    status.lastSyncedCommit = head;
    status.lastSyncedMessage = await snapshot.summary?.();
    status.shortCommit = head.slice(0, 12);
    status.lastSyncTime = new Date().toISOString();
    status.objects = plan.objects.length;
    unstall();
    condition(
      'Ready',
      true,
      Reason.Synced,
      `${syncedMessage(plan.objects.length, head)} (${applied.changed} changed, ${applied.pruned} pruned)`,
    );
    deps.logger.info(
      { source: source.metadata.name, commit: head.slice(0, 12), ...applied },
      'source synced',
    );
    return finish({
      outcome: 'synced',
      commit: head,
      plan,
      message: `${syncedMessage(plan.objects.length, head)} (${applied.changed} changed, ${applied.pruned} pruned)`,
      pruned: prunedNames,
    });
  } catch (thrown) {
    if (thrown instanceof StalledError) throw thrown;
    const error = asError(thrown);
    const reason = error instanceof SlessError ? error.reason : Reason.SyncFailed;
    condition('Ready', false, reason, error.message);
    deps.logger.error({ source: source.metadata.name, err: error.message }, 'sync failed');
    return finish({ outcome: 'failed', commit: head, message: error.message });
  }
}

/** A commit that would take the namespace past its function quota is refused as a whole. */
function functionQuotaProblem(
  deps: SyncDeps,
  source: GitSource,
  documents: readonly { kind: string }[],
  existing: readonly AnyResource[],
): string | undefined {
  if (deps.maxFunctions === undefined) return undefined;
  const mine = documents.filter((d) => d.kind === 'Function').length;
  if (mine <= deps.maxFunctions) {
    const others = existing.filter((f) => f.metadata.labels?.[LABEL_SOURCE] !== source.metadata.name).length;
    if (others + mine <= deps.maxFunctions) return undefined;
    return `quota: namespace ${source.metadata.namespace} may hold ${deps.maxFunctions} functions; its other sources hold ${others} and this commit defines ${mine} (SLESS_QUOTA_FUNCTIONS)`;
  }
  return `quota: namespace ${source.metadata.namespace} may hold ${deps.maxFunctions} functions; this commit defines ${mine} (SLESS_QUOTA_FUNCTIONS)`;
}

/** Why a pin cannot be served, or undefined when its commit is on the branch. */
async function pinProblem(
  reader: SourceReader,
  source: GitSource,
  pinned: string,
  head: string,
): Promise<{ reason: Reason; message: string } | undefined> {
  const branch = branchOf(source);
  try {
    if (await reader.isOnBranch(pinned, head)) return undefined;
    return {
      reason: 'PinNotOnBranch',
      message: `spec.ref.commit: ${pinned} is not a commit of branch "${branch}"`,
    };
  } catch (thrown) {
    const error = asError(thrown);
    return { reason: error instanceof SlessError ? error.reason : 'SourceFailed', message: error.message };
  }
}

function syncedMessage(objects: number, commit: string): string {
  return `applied ${objects} objects at ${commit.slice(0, 12)}`;
}

function readyPhase(status: GitSourceStatus): string {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  if (!ready) return 'Pending';
  return ready.status === 'True' ? 'Ready' : ready.reason === Reason.Suspended ? 'Suspended' : 'Failed';
}

// Where callers found them before apply-plan.ts held them.
export { applyPlan, sameIntent } from './apply-plan.js';
