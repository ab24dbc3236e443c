/**
 * The one place a reconcile's status is written: load the object, let the reconciler fill one
 * StatusUpdate, then patch once at the end, whatever it returned or threw (skipped when nothing
 * changed). A failure a retry may fix is summarised into Ready and Reconciling in that same patch,
 * with the delay of the retry, so no second writer races the next run.
 */
import type { Logger } from 'pino';
import { asError, RecordedFailure, SlessError } from '../../core/errors.js';
import type { ObjectStore } from '../../core/interfaces.js';
import type { AnyResource, BaseStatus } from '../../core/resources.js';
import type { KindName } from '../../core/schemas.js';
import { Reason, StatusUpdate } from '../../core/status.js';
import type { ObjectRef } from './object-ref.js';

/** What a reconcile asks for next: nothing (an event or a finished task brings the next run), or a run after a delay. */
export type Result = { requeueAfterMs?: undefined } | { requeueAfterMs: number };

export const Done: Result = {};

export function requeueAfter(ms: number): Result {
  return { requeueAfterMs: ms };
}

export interface PatchOnceOptions<
  K extends KindName,
  O extends AnyResource & { status?: S },
  S extends BaseStatus,
> {
  store: ObjectStore;
  logger: Logger;
  ref: ObjectRef<K>;
  /** The delay of the retry if this run fails (the work queue's, reserved for this key). */
  retryDelayMs: () => number;
  reconcile: (object: O, update: StatusUpdate<S>) => Promise<Result>;
  /** The object is gone: clean up what it owned. */
  finalize: () => Promise<void>;
}

export async function reconcileAndPatch<
  K extends KindName,
  O extends AnyResource & { status?: S },
  S extends BaseStatus,
>(options: PatchOnceOptions<K, O, S>): Promise<Result> {
  const { ref } = options;
  const object = (await options.store.get(ref.kind, ref.namespace, ref.name)) as O | undefined;
  if (!object) {
    await options.finalize();
    return Done;
  }
  const update = new StatusUpdate<S>(object);
  let result: Result;
  try {
    result = await options.reconcile(object, update);
  } catch (thrown) {
    const error = asError(thrown);
    // A RecordedFailure's reconciler already wrote why into the update; anything else says it retries.
    if (!(error instanceof RecordedFailure)) {
      const reason = error instanceof SlessError ? error.reason : Reason.ReconcileFailed;
      const message = `${error.message}; retrying in ${Math.ceil(options.retryDelayMs() / 1000)}s`;
      update
        .set('Ready', false, reason, message)
        .set('Reconciling', true, Reason.ProgressingWithRetry, message);
    }
    await update
      .write(options.store, object)
      .catch((writeError: unknown) =>
        options.logger.warn(
          { [ref.kind]: `${ref.namespace}/${ref.name}`, err: asError(writeError).message },
          'status write failed',
        ),
      );
    throw error;
  }
  await update.write(options.store, object);
  return result;
}
