/** True while a process with this pid exists (EPERM: it exists, under another uid). */
function alive(pid: number): boolean {
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
  return Number.isInteger(pid) && pid !== process.pid && !alive(pid);
}
