/**
 * The duration strings manifests and flags use (`500ms`, `30s`, `1m`, `2h`), parsed in one place,
 * and the bounds a poll interval must keep, so that a typo can neither hammer someone's git server
 * nor all but stop polling.
 */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses the schema's interval format (`500ms`, `30s`, `1m`, `2h`) into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^([0-9]+)(ms|s|m|h)$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}"`);
  return Number(match[1]) * (UNITS[match[2] as string] as number);
}

/** Polling faster than this is a request loop against someone's git server; slower is a typo. */
export const MIN_INTERVAL_MS = 1000;
export const MAX_INTERVAL_MS = 7 * 24 * 3_600_000;

/** Why a poll interval is refused (format or bounds), or undefined when it is fine. */
export function intervalProblem(text: string): string | undefined {
  if (!/^[0-9]+(ms|s|m|h)$/.test(text)) return 'must look like 500ms, 10s, 1m or 1h';
  const ms = parseDuration(text);
  if (ms < MIN_INTERVAL_MS || ms > MAX_INTERVAL_MS)
    return `must be between ${MIN_INTERVAL_MS / 1000}s and ${MAX_INTERVAL_MS / 3_600_000}h`;
  return undefined;
}
