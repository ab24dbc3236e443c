/**
 * Time stamps of the start-up's phases, for the start-up benchmark: with `SLESS_STARTUP_MARKS=FILE`
 * each phase appends one JSON line `{ phase, subject, at }` (`at` in epoch milliseconds, comparable
 * across processes). Unset, a mark costs one property read. Never on for a user: it is a measuring aid.
 */
import { appendFileSync } from 'node:fs';

const target = process.env.SLESS_STARTUP_MARKS;

export function startupMark(phase: string, subject?: string): void {
  if (!target) return;
  const at = performance.timeOrigin + performance.now();
  appendFileSync(target, `${JSON.stringify({ phase, ...(subject ? { subject } : {}), at })}\n`);
}
