/**
 * Reads for poll loops that run for minutes: a moment of API trouble (a reset connection, a 5xx
 * while the API server restarts) must not turn a running kaniko build or run into a failed one.
 * Only a long streak of failures is reported.
 */
import { KubeApiError } from './http.js';

export class PollReader {
  private failures = 0;
  private readonly maxFailures: number;

  constructor(options: { maxFailures?: number } = {}) {
    this.maxFailures = options.maxFailures ?? 30;
  }

  /** The read's result, or `retry` after a transient failure (caller sleeps and polls again). */
  async read<T>(read: () => Promise<T>): Promise<{ value: T } | 'retry'> {
    try {
      const value = await read();
      this.failures = 0;
      return { value };
    } catch (error) {
      const permanent =
        error instanceof KubeApiError && error.code >= 400 && error.code < 500 && error.code !== 429;
      if (permanent || ++this.failures >= this.maxFailures) throw error;
      return 'retry';
    }
  }
}
