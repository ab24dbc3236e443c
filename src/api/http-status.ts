/**
 * The one place an error becomes an HTTP status: errors below the API say what kind of failure
 * they are (their category), and only the API's edge knows how HTTP spells it.
 */
import type { ErrorCategory, SlessError } from '../core/errors.js';

const STATUS_OF: Readonly<Record<ErrorCategory, number>> = {
  Invalid: 400,
  Unauthenticated: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  // A dependency sless calls failed: the gateway's answer, not the caller's fault nor ours.
  Failed: 502,
  Unavailable: 503,
};

export function httpStatusOf(error: SlessError): number {
  return STATUS_OF[error.category];
}
