/** How times and durations read on the page: short, and the exact value in a tooltip. */

export function ago(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const seconds = Math.round((now - ms) / 1000);
  const future = seconds < 0;
  const s = Math.abs(seconds);
  const amount =
    s < 60
      ? `${s}s`
      : s < 3600
        ? `${Math.floor(s / 60)}m`
        : s < 86400
          ? `${Math.floor(s / 3600)}h`
          : `${Math.floor(s / 86400)}d`;
  return future ? `in ${amount}` : `${amount} ago`;
}

export function duration(ms: number | undefined): string {
  if (ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function short(sha: string | undefined): string {
  return sha ? sha.slice(0, 12) : '—';
}
