const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses the schema's interval format (`500ms`, `30s`, `1m`, `2h`) into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^([0-9]+)(ms|s|m|h)$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}"`);
  return Number(match[1]) * (UNITS[match[2] as string] as number);
}
