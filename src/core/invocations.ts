/**
 * Asynchronous invocations as the core sees them: the durable record of one queued request, its
 * attempts and its result, and the pure rules that decide what an answer means (done, retry, dead
 * letter) and when the next attempt is due. No I/O: the store and the workers live elsewhere.
 */

export type InvocationState = 'queued' | 'running' | 'succeeded' | 'failed' | 'dead-lettered';

/** States an invocation never leaves by itself (a replay may queue a failed or dead-lettered one). */
export const FINAL_STATES: ReadonlySet<InvocationState> = new Set(['succeeded', 'failed', 'dead-lettered']);

/** The request as it is delivered again on every attempt. */
export interface StoredRequest {
  method: string;
  /** The function's own path and query (`/` when the client named none). */
  path: string;
  /** Raw name/value pairs, hop-by-hop headers already removed. */
  headers: [string, string][];
  /** The body, base64. */
  body: string;
}

export interface InvocationAttempt {
  number: number;
  startedAt: string;
  /** Unset while the attempt runs, and on an attempt that a stop of sless interrupted. */
  finishedAt?: string;
  status?: number;
  error?: string;
  /** Cut by a stop or a kill of sless: sent again, and not counted against the attempt budget. */
  interrupted?: boolean;
}

export interface InvocationResult {
  status: number;
  headers: Record<string, string>;
  /** At most the result limit; `truncated` says whether more was answered. */
  body: string;
  bodyEncoding: 'utf8' | 'base64';
  truncated: boolean;
}

export interface CallbackRecord {
  url: string;
  /** pending: the result is still to be sent (after a restart too); sent or failed: it was tried. */
  state: 'pending' | 'sent' | 'failed';
  status?: number;
  error?: string;
}

export interface InvocationRecord {
  id: string;
  namespace: string;
  function: string;
  state: InvocationState;
  createdAt: string;
  updatedAt: string;
  request: StoredRequest;
  /** The attempt budget: attempts.length reaching it ends the invocation (a replay raises it). */
  maxAttempts: number;
  /** The first retry's delay; each next one doubles, with jitter. */
  backoffMs: number;
  attempts: InvocationAttempt[];
  /** When the next attempt may start (queued only). */
  nextAttemptAt?: string;
  result?: InvocationResult;
  callback?: CallbackRecord;
  replays?: number;
}

/** What `spec.async` leaves unset. */
export const ASYNC_DEFAULTS = { maxAttempts: 3, backoffMs: 1000, concurrency: 4 } as const;

/** `1 attempt`, `3 attempts`: how the messages a user reads count attempts. */
export const attempts = (count: number): string => `${count} attempt${count === 1 ? '' : 's'}`;

/** Retries never wait longer than this, however many attempts came before. */
export const MAX_BACKOFF_MS = 10 * 60_000;

/** What one attempt's outcome means for the invocation. */
export type AttemptVerdict = 'succeeded' | 'failed' | 'retry';

/**
 * 2xx and 3xx are the function's success; a 4xx is the function's final answer about this request,
 * which the same request gets again, so it is not retried, except 408 and 429, which ask for a
 * later try. A 5xx, a timeout (the proxy's 504) or no answer at all (undefined) may pass next time.
 */
export function verdictOf(status: number | undefined): AttemptVerdict {
  if (status === undefined) return 'retry';
  if (status >= 200 && status < 400) return 'succeeded';
  if (status === 408 || status === 429) return 'retry';
  if (status >= 400 && status < 500) return 'failed';
  return 'retry';
}

/**
 * The delay before attempt `next` (2 for the first retry): backoff × 2^(next-2), capped, with equal
 * jitter (between half of it and all of it), so that invocations failing together do not come back
 * together while each still waits at least half its step.
 */
export function retryDelayMs(backoffMs: number, next: number, random: () => number = Math.random): number {
  const step = Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** Math.max(0, next - 2));
  return Math.round(step / 2 + random() * (step / 2));
}
