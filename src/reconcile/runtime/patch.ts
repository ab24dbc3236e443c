/**
 * The one place a reconcile's status is written: load the object, let the reconciler fill one
 * StatusUpdate, then patch once at the end, whatever it returned or threw (skipped when nothing
 * changed). What a throw means comes from its class (errors.ts): a StalledError is summarised into
 * Ready, Reconciling and Stalled and not requeued; a WaitingError into Ready and Reconciling, with a
 * run again after its delay; anything else is a failure a retry may fix, summarised into Ready and
 * Reconciling with the delay of the retry and rethrown to the work queue. Each in that same patch,
 * so no second writer races the next run.
 */

import type { Logger } from 'pino';
import { asError, RecordedFailure, SlessError } from '../../core/errors.js';
import type { ObjectStore } from '../../core/interfaces.js';
import type { AnyResource, BaseStatus } from '../../core/resources.js';
import type { KindName } from '../../core/schemas.js';
import { Reason, StatusUpdate } from '../../core/status.js';
import { StalledError, WaitingError } from './errors.js';
import { type ObjectRef, refKey } from './object-ref.js';

/** What a reconcile asks for next: nothing (an event or a finished task brings the next run), or a run after a delay. */
export type Result = { requeueAfterMs?: undefined } | { requeueAfterMs: number };

export const Done: Result = {};

export function requeueAfter(ms: number): Result {
  return { requeueAfterMs: ms };
}

export interface PatchOptions<
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
}

export interface PatchOnceOptions<
  K extends KindName,
  O extends AnyResource & { status?: S },
  S extends BaseStatus,
> extends PatchOptions<K, O, S> {
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
  return patchOnce(options, object);
}

/**
 * One reconcile of an object already read, and its one status write: what reconcileAndPatch runs
 * once it has the object, and what a caller holding the object already (a source's sync) runs.
 */
export async function patchOnce<
  K extends KindName,
  O extends AnyResource & { status?: S },
  S extends BaseStatus,
>(options: PatchOptions<K, O, S>, object: O): Promise<Result> {
  const { ref } = options;
  const update = new StatusUpdate<S>(object);
  let result: Result;
  try {
    result = await options.reconcile(object, update);
  } catch (thrown) {
    const error = asError(thrown);
    // Neither is a failure of this run: the status says what it waits for, and the result when to look again.
    if (error instanceof StalledError || error instanceof WaitingError) {
      const result = summarise(options, object, update, error);
      await update.write(options.store, object);
      return result;
    }
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
          { [ref.kind]: refKey(ref), err: asError(writeError).message },
          'status write failed',
        ),
      );
    throw error;
  }
  await update.write(options.store, object);
  return result;
}

/** A stall or a wait into conditions, and what the work queue is to do next (nothing, or wait). */
function summarise<K extends KindName, O extends AnyResource & { status?: S }, S extends BaseStatus>(
  options: PatchOptions<K, O, S>,
  object: O,
  update: StatusUpdate<S>,
  error: StalledError | WaitingError,
): Result {
  const { reason, readyMessage } = error;
  if (error instanceof WaitingError) {
    update
      .set('Ready', false, reason, readyMessage)
      .set('Reconciling', true, reason, readyMessage)
      .remove('Stalled');
    return requeueAfter(error.requeueAfterMs);
  }
  // Said in the log once, when it stalls: every later pass (a resync) finds the same and says nothing.
  const before = object.status?.conditions?.find((c) => c.type === 'Stalled');
  if (before?.status !== 'True' || before.reason !== reason || before.message !== error.message)
    options.logger.info(
      { [options.ref.kind]: refKey(options.ref), reason, err: error.message },
      `${options.ref.kind} stalled: a retry cannot fix it, a change can`,
    );
  update
    .set('Ready', false, reason, readyMessage)
    .set('Reconciling', false, reason, readyMessage)
    .set('Stalled', true, reason, error.message);
  return Done;
}
