/**
 * CPU time of a process read from /proc/PID/stat, for benchmarks that report the work sless did and
 * not only the wall time, which on a shared machine also counts the wait for a core.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The kernel's clock tick rate, the unit of /proc/PID/stat's CPU times. */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim() || 100);

/** User + system CPU seconds a process has used so far, from /proc/PID/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses: the fields start after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
