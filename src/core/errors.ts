/**
 * sless's typed errors. Each carries a condition reason, so a failure can go into status as it is,
 * and a category, which only the API turns into an HTTP status: code below the API reports failures
 * in its own terms and knows nothing of HTTP.
 */
import type { BuildRecord } from './resources.js';
import type { Reason } from './status.js';

/**
 * What kind of failure an error is, in the caller's terms: the API turns it into an HTTP status at
 * its edge, and nothing below it knows about HTTP.
 * - Invalid: the request or the manifest is wrong; the same input fails the same way.
 * - Unauthenticated / Forbidden: who the caller is, or what they may do.
 * - NotFound, Conflict: the object named is missing, or in a state that refuses the change.
 * - Unavailable: a piece sless itself needs is missing or unreachable; retrying later may pass.
 * - Failed: something sless depends on (git, a build, the cluster) failed.
 */
export type ErrorCategory =
  | 'Invalid'
  | 'Unauthenticated'
  | 'Forbidden'
  | 'NotFound'
  | 'Conflict'
  | 'Unavailable'
  | 'Failed';

/** Typed errors. Each carries a condition reason (for status) and its category (for the API). */
export class SlessError extends Error {
  readonly reason: Reason;
  readonly category: ErrorCategory;
  constructor(message: string, options: { reason: Reason; category?: ErrorCategory; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.reason = options.reason;
    this.category = options.category ?? 'Failed';
  }
}

/** One problem in one document of one file: `file#index field: reason`. */
export interface ManifestIssue {
  file: string;
  index: number;
  field: string;
  reason: string;
}

export function formatIssue(issue: ManifestIssue): string {
  const where = `${issue.file}#${issue.index}`;
  return issue.field ? `${where} ${issue.field}: ${issue.reason}` : `${where}: ${issue.reason}`;
}

export class ValidationError extends SlessError {
  readonly issues: readonly ManifestIssue[];
  constructor(issues: readonly ManifestIssue[]) {
    super(issues.map(formatIssue).join('; '), { reason: 'ValidationFailed', category: 'Invalid' });
    this.issues = issues;
  }
}

export class BadRequestError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'BadRequest', category: 'Invalid' });
  }
}

export class NotFoundError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'NotFound', category: 'NotFound' });
  }
}

export class ConflictError extends SlessError {
  constructor(message: string, reason: Reason = 'Conflict', cause?: unknown) {
    super(message, { reason, category: 'Conflict', cause });
  }
}

/** A piece sless itself needs is missing or unreachable (a JWKS endpoint, its own configuration). */
export class UnavailableError extends SlessError {
  constructor(message: string, reason: Reason = 'Unavailable', cause?: unknown) {
    super(message, { reason, category: 'Unavailable', cause });
  }
}

export class SourceError extends SlessError {
  constructor(message: string, reason: Reason = 'SourceFailed', cause?: unknown) {
    super(message, { reason, cause });
  }
}

export class BuildError extends SlessError {
  readonly logTail: string;
  constructor(message: string, logTail: string, cause?: unknown, reason: Reason = 'BuildFailed') {
    super(message, { reason, cause });
    this.logTail = logTail;
  }
}

/**
 * A build that ran and failed on the function's code or its dependencies: the same code fails the
 * same way again, so it is not retried until the code changes or someone asks for a rebuild.
 * Anything else thrown while building (storage, the API, a fetch) may pass and is retried.
 */
export class BuildFailedError extends BuildError {
  readonly record: BuildRecord;
  constructor(record: BuildRecord, cause?: unknown, reason: Reason = 'BuildFailed') {
    super(record.message ?? 'build failed', record.logTail ?? '', cause, reason);
    this.record = record;
  }
}

/**
 * A new revision that did not start serving: its process exited, or its pods never became available
 * (`CrashLoopBackOff`, `ImagePullBackOff`, …). The platform's other errors (the API failing for a
 * moment) are not this: they are retried without calling the revision failed.
 */
export class RolloutError extends SlessError {
  constructor(message: string, cause?: unknown) {
    super(message, { reason: 'RolloutFailed', cause });
  }
}

/**
 * A failure the reconciler already wrote to status that a later attempt may fix (a rollout whose
 * pods are not available yet): the work queue retries it with backoff without rewriting status.
 */
export class RecordedFailure extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'RecordedFailure';
  }
}

/** Normalises anything thrown into an Error, since third-party code may throw non-Errors. */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
