/**
 * Tells leftovers from live state: sless names some things after its pid (cgroups, socket
 * directories), which a process killed with SIGKILL cannot remove, so a later start asks whether
 * their owner still exists.
 */

/** True while a process with this pid exists (EPERM: it exists, under another uid). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether an entry that a sless process named after its pid (`pattern` captures the pid) was left
 * behind by a process that is gone: a kill -9 leaves cgroups and socket directories that the next
 * start removes.
 */
export function leftBehind(entry: string, pattern: RegExp): boolean {
  const pid = Number(pattern.exec(entry)?.[1] ?? Number.NaN);
  return Number.isInteger(pid) && pid !== process.pid && !processExists(pid);
}
