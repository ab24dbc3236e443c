/**
 * How a reconcile that cannot finish says what comes next, as the error it throws (the shape of
 * Flux's source-controller Stalling / Waiting / Generic errors). The runtime (patch.ts) turns each
 * into conditions and a requeue, so no reconciler writes Stalled or Reconciling for these by hand:
 * - StalledError: retrying cannot reach the desired state (a build verdict on the code, a quota):
 *   Stalled, and no requeue; an event (a new commit, a rebuild asked for, room in the quota) brings
 *   the next run.
 * - WaitingError: something outside is not there yet (a secret): Reconciling, and a run again after
 *   exactly the delay given, without the work queue's backoff.
 * - Anything else is transient: the work queue retries it with backoff, and status says when.
 * A reconciler that already wrote why into status and wants backoff throws core's RecordedFailure.
 * What is particular to a kind (its phase, a "still serving" note, its events) the reconciler sets
 * in the update before it throws: the runtime writes the update whatever was thrown.
 */
import type { Reason } from '../../core/status.js';

export interface OutcomeErrorOptions {
  /** Ready's (and Reconciling's) message when it says more than `message`, e.g. what still serves. */
  readyMessage?: string;
  cause?: unknown;
}

/** What the runtime reads of either: the condition reason and the messages. */
export abstract class OutcomeError extends Error {
  readonly reason: Reason;
  /** What Ready and Reconciling say: `message`, unless the reconciler gave more. */
  readonly readyMessage: string;

  constructor(reason: Reason, message: string, options: OutcomeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.reason = reason;
    this.readyMessage = options.readyMessage ?? message;
  }
}

/** The desired state cannot be reached by retrying: Stalled=True, no requeue. */
export class StalledError extends OutcomeError {}

/** Waiting on something outside: Reconciling=True, run again after `requeueAfterMs`, no backoff. */
export class WaitingError extends OutcomeError {
  readonly requeueAfterMs: number;

  constructor(reason: Reason, message: string, requeueAfterMs: number, options: OutcomeErrorOptions = {}) {
    super(reason, message, options);
    this.requeueAfterMs = requeueAfterMs;
  }
}
