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

/** Normalises anything thrown into an Error, since third-party code may throw non-Errors. */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
