/**
 * The one way status is written. Every reconciler builds its status with a StatusUpdate: conditions
 * carry the object's generation (kstatus reads `observedGeneration` to tell stale status from
 * current), keep `lastTransitionTime` while their status stays the same, and use the reasons below.
 */
import { type Condition, type ConditionStatus, type ConditionType, setCondition } from './conditions.js';
import { stableStringify } from './hash.js';
import type { ObjectStore } from './interfaces.js';
import type { AnyResource, BaseStatus } from './resources.js';

export const Reason = {
  // GitSource
  Synced: 'Synced',
  Suspended: 'Suspended',
  ValidationFailed: 'ValidationFailed',
  SourceFailed: 'SourceFailed',
  SyncFailed: 'SyncFailed',
  OwnershipConflict: 'OwnershipConflict',
  /** Another field manager owns a field sless would set; sless leaves it (no forced apply). */
  ApplyConflict: 'ApplyConflict',
  QuotaExceeded: 'QuotaExceeded',
  PinNotOnBranch: 'PinNotOnBranch',
  // Why a source cannot be read (the source readers' typed errors)
  RepositoryNotFound: 'RepositoryNotFound',
  BranchNotFound: 'BranchNotFound',
  HeadMoved: 'HeadMoved',
  FetchFailed: 'FetchFailed',
  InvalidPath: 'InvalidPath',
  /** A secret (or a key of one) that a source or a Function references is not in its namespace. */
  SecretNotFound: 'SecretNotFound',
  SecretInvalid: 'SecretInvalid',
  OutboundRefused: 'OutboundRefused',
  InvalidURL: 'InvalidURL',
  SourceUnreachable: 'SourceUnreachable',
  // Function
  MissingAnnotations: 'MissingAnnotations',
  Building: 'Building',
  BuildFailed: 'BuildFailed',
  CodeValidationFailed: 'CodeValidationFailed',
  Deploying: 'Deploying',
  RolloutFailed: 'RolloutFailed',
  Serving: 'Serving',
  ScaledToZero: 'ScaledToZero',
  Disabled: 'Disabled',
  /** A new revision takes a share of requests while its answers are judged. */
  CanaryProgressing: 'CanaryProgressing',
  CanaryPromoted: 'CanaryPromoted',
  /** A new revision breached a limit of its canary: every request went back to the old one. */
  CanaryRolledBack: 'CanaryRolledBack',
  // Trigger
  Published: 'Published',
  Scheduled: 'Scheduled',
  ScheduleFailed: 'ScheduleFailed',
  FunctionNotFound: 'FunctionNotFound',
  /** amqp: messages that failed are published to the Trigger's deadLetterExchange. */
  DeadLetterExchange: 'DeadLetterExchange',
  /** amqp: no deadLetterExchange, so a message that failed is rejected and the broker may drop it. */
  NoDeadLetterExchange: 'NoDeadLetterExchange',
  // FunctionJob
  Skipped: 'Skipped',
  WaitingForBuild: 'WaitingForBuild',
  Running: 'Running',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
  RunFailed: 'RunFailed',
  // Events only
  ScaledUp: 'ScaledUp',
  ScaledOut: 'ScaledOut',
  ScaledIn: 'ScaledIn',
  BuildSucceeded: 'BuildSucceeded',
  Pruned: 'Pruned',
  HistoryPruned: 'HistoryPruned',
  // API answers
  BadRequest: 'BadRequest',
  NotFound: 'NotFound',
  Conflict: 'Conflict',
  Unauthorized: 'Unauthorized',
  Forbidden: 'Forbidden',
  Unavailable: 'Unavailable',
  LogsUnavailable: 'LogsUnavailable',
  // Any kind: an error a retry may fix; the work queue retries with backoff.
  ProgressingWithRetry: 'ProgressingWithRetry',
  ReconcileFailed: 'ReconcileFailed',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** Long messages (a log tail, many manifest issues) are cut: status is not a log. */
export const MAX_CONDITION_MESSAGE = 4000;

interface Versioned<S extends BaseStatus> {
  metadata: { generation?: number };
  status?: S;
}

export class StatusUpdate<S extends BaseStatus> {
  readonly status: S;
  readonly generation: number;

  constructor(object: Versioned<S>, base?: S) {
    this.generation = object.metadata.generation ?? 1;
    this.status = { ...((base ?? object.status ?? {}) as S) };
  }

  /** Sets one condition; a typed error's reason is one of `Reason` too. */
  set(type: ConditionType, status: ConditionStatus | boolean, reason: Reason, message: string): this {
    this.status.conditions = setCondition(this.status.conditions, {
      type,
      status: typeof status === 'boolean' ? (status ? 'True' : 'False') : status,
      reason,
      message: message.slice(0, MAX_CONDITION_MESSAGE),
      observedGeneration: this.generation,
    });
    return this;
  }

  remove(type: ConditionType): this {
    this.status.conditions = (this.status.conditions ?? []).filter((c) => c.type !== type);
    return this;
  }

  get(type: ConditionType): Condition | undefined {
    return this.status.conditions?.find((c) => c.type === type);
  }

  /** The status to write, with the generation it describes. */
  done(): S {
    this.status.observedGeneration = this.generation;
    return this.status;
  }

  /**
   * Writes the status unless it is what the object already has: a periodic resync of an object
   * that is fine must cost a read, not a write and a watch event per object.
   */
  async write(store: ObjectStore, object: AnyResource): Promise<void> {
    const next = this.done();
    const previous = object.status ?? {};
    if (stableStringify({ ...previous, ...next }) === stableStringify(previous)) return;
    await store.patchStatus(object, next);
  }
}
