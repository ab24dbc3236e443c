/**
 * The GitSource reconciler: a source's reader is open and its poll armed, or its status says why it
 * cannot be (a missing secret, an unreachable server), retried with backoff since either may be fixed
 * without a change to the source. Its sync is asked for separately (SourceSyncs), and a deleted
 * source's objects are pruned before its finalizer goes, so a prune that fails keeps it for the retry.
 */
import { asError, RecordedFailure, SlessError } from '../../core/errors.js';
import type { ObjectStore } from '../../core/interfaces.js';
import type { GitSource, GitSourceStatus } from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import { refKey } from '../runtime/object-ref.js';
import { Done, type Result } from '../runtime/patch.js';
import type { SourceReaders } from './readers.js';
import type { SourceSyncs } from './syncs.js';

export interface GitSourceReconcileDeps {
  store: ObjectStore;
  readers: SourceReaders;
  syncs: SourceSyncs;
  /** Asks for a sync of the source without waiting for it (a failure is logged where it runs). */
  requestSync: (namespace: string, name: string) => void;
}

export async function reconcileGitSource(
  deps: GitSourceReconcileDeps,
  source: GitSource,
  update: StatusUpdate<GitSourceStatus>,
  options: { sync: boolean },
): Promise<Result> {
  try {
    await deps.readers.open(source);
  } catch (thrown) {
    const error = asError(thrown);
    update.set(
      'Ready',
      false,
      error instanceof SlessError ? error.reason : Reason.SourceFailed,
      error.message,
    );
    update.status.phase = 'Failed';
    throw new RecordedFailure(`cannot open source ${refKey(source.metadata)}: ${error.message}`, error);
  }
  if (options.sync) deps.requestSync(source.metadata.namespace, source.metadata.name);
  return Done;
}

/**
 * The GitSource is gone, or being deleted (a store hides a deleting object, so the runtime finds it
 * gone either way): its reader closes, what it applied goes with it, and only then does the store
 * let the source go (on kube: its finalizer is removed). A failure leaves the finalizer in place and
 * goes back to the work queue, which retries with backoff.
 */
export async function finalizeGitSource(
  deps: GitSourceReconcileDeps,
  namespace: string,
  name: string,
): Promise<void> {
  deps.readers.close(namespace, name);
  await deps.syncs.prune(namespace, name);
  await deps.store.releaseFinalizer?.('GitSource', namespace, name);
}
