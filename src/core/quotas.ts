/**
 * Per-namespace limits: what one tenant may make sless hold and run. The same numbers apply on both
 * platforms; an admin sets them (SLESS_QUOTA_*), and a commit or request over a limit is refused with
 * a message that names the limit, never half applied.
 */
export interface Quotas {
  /** GitSources per namespace. */
  readonly maxSources: number;
  /** Functions per namespace, across all its sources. */
  readonly maxFunctions: number;
  /** Running processes (replicas of enabled functions) per namespace. */
  readonly maxProcesses: number;
}

export const DEFAULT_QUOTAS: Quotas = Object.freeze({ maxSources: 20, maxFunctions: 200, maxProcesses: 50 });

export const QUOTA_ENV: Readonly<Record<keyof Quotas, string>> = Object.freeze({
  maxSources: 'SLESS_QUOTA_SOURCES',
  maxFunctions: 'SLESS_QUOTA_FUNCTIONS',
  maxProcesses: 'SLESS_QUOTA_PROCESSES',
});
