import type { BuildRecord } from './resources.js';

/**
 * Typed errors. Each carries a condition reason (for status) and an HTTP status (for the API),
 * so callers never map error strings to codes by hand.
 */
export class SlessError extends Error {
  readonly reason: string;
  readonly httpStatus: number;
  constructor(message: string, options: { reason: string; httpStatus: number; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.reason = options.reason;
    this.httpStatus = options.httpStatus;
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
    super(issues.map(formatIssue).join('; '), { reason: 'ValidationFailed', httpStatus: 400 });
    this.issues = issues;
  }
}

export class BadRequestError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'BadRequest', httpStatus: 400 });
  }
}

export class NotFoundError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'NotFound', httpStatus: 404 });
  }
}

export class ConflictError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'Conflict', httpStatus: 409 });
  }
}

export class SourceError extends SlessError {
  constructor(message: string, reason = 'SourceFailed', cause?: unknown) {
    super(message, { reason, httpStatus: 502, cause });
  }
}

export class BuildError extends SlessError {
  readonly logTail: string;
  constructor(message: string, logTail: string, cause?: unknown, reason = 'BuildFailed') {
    super(message, { reason, httpStatus: 502, cause });
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
  constructor(record: BuildRecord, cause?: unknown, reason = 'BuildFailed') {
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
    super(message, { reason: 'RolloutFailed', httpStatus: 502, cause });
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
