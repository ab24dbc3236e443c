/**
 * The code security gate's verdicts, one per build key, kept where a restart finds them: the same
 * code is never sent twice, not even across restarts. Wherever they are kept, tenants must not be
 * able to write there (a forged "Passed" would let unchecked code build).
 */
import type { CodeCheck } from './resources.js';

export interface StoredCodeVerdict {
  check: CodeCheck;
  /** The commit whose code was checked (a refusal is reported as a failed build of it). */
  commit: string;
  /** When the check was asked and answered: a refused build reads the same before and after a restart. */
  startedAt: string;
  finishedAt: string;
}

export interface CodeVerdictStore {
  get(buildKey: string): Promise<StoredCodeVerdict | undefined>;
  /** A verdict for a key never changes; storing one that is there already keeps the first. */
  set(buildKey: string, verdict: StoredCodeVerdict): Promise<void>;
}

const RESULTS: readonly string[] = ['Passed', 'Refused', 'Skipped', 'Unavailable'];

/** A stored verdict read back, or an Error naming what is wrong with it. */
export function decodeStoredVerdict(value: unknown, what: string): StoredCodeVerdict {
  const record = value as Partial<StoredCodeVerdict> | null;
  const check = record?.check as Partial<CodeCheck> | undefined;
  if (typeof record !== 'object' || record === null) throw new Error(`${what} must be an object`);
  if (!check || !RESULTS.includes(String(check.result)) || typeof check.message !== 'string')
    throw new Error(`${what}.check must be {result, message}`);
  for (const field of ['commit', 'startedAt', 'finishedAt'] as const)
    if (typeof record[field] !== 'string') throw new Error(`${what}.${field} must be a string`);
  return {
    check: { result: check.result as CodeCheck['result'], message: check.message },
    commit: record.commit as string,
    startedAt: record.startedAt as string,
    finishedAt: record.finishedAt as string,
  };
}
