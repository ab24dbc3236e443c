/**
 * RFC 7240's `Prefer: respond-async`, read from a request's raw header lines: the /fn/ path checks
 * it on every request, so it builds no header object and splits nothing unless a Prefer line exists.
 */

/** True when a Prefer value asks for `respond-async` (a token among others, parameters allowed). */
export function prefersAsync(prefer: string | readonly string[] | undefined): boolean {
  if (prefer === undefined) return false;
  for (const value of typeof prefer === 'string' ? [prefer] : prefer)
    for (const part of value.split(','))
      if (part.split(';')[0]?.split('=')[0]?.trim().toLowerCase() === 'respond-async') return true;
  return false;
}

/** The same over `rawHeaders` (name, value, name, value, …). */
export function rawPrefersAsync(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 6 && name.toLowerCase() === 'prefer' && prefersAsync(raw[i + 1])) return true;
  }
  return false;
}
