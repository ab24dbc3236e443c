/**
 * Wakes whoever waits for an object to change, from the watch that sees it change: a rollout or a
 * build then reads its Deployment or Job when the API server says it moved, not every second on a
 * timer. A wait also ends after a fallback delay, so a watch that is down or missed an event costs a
 * late read, never a wait that does not end.
 */
export class ChangeSignal {
  private readonly waiters = new Map<string, Set<() => void>>();

  /** Ends every wait on `key`. */
  notify(key: string): void {
    const waiting = this.waiters.get(key);
    if (!waiting) return;
    this.waiters.delete(key);
    for (const wake of waiting) wake();
  }

  /** Ends every wait (a watch re-listed: anything may have changed while it was down). */
  notifyAll(): void {
    for (const key of [...this.waiters.keys()]) this.notify(key);
  }

  /**
   * Resolves on the next `notify(key)`, or after `fallbackMs`. Ask before reading the object: a
   * change between the read and this call would otherwise wait for the fallback.
   */
  next(key: string, fallbackMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let waiting = this.waiters.get(key);
      if (!waiting) {
        waiting = new Set();
        this.waiters.set(key, waiting);
      }
      const set = waiting;
      const wake = () => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(wake, fallbackMs);
      timer.unref();
      set.add(wake);
    });
  }

  /** How many keys are waited on (for tests: a finished wait leaves nothing behind). */
  get size(): number {
    return this.waiters.size;
  }
}

/** The key a Deployment's changes are signalled by. */
export function deploymentKey(namespace: string, name: string): string {
  return `Deployment/${namespace}/${name}`;
}

/** The key a build Job's changes (its own, or its pod's) are signalled by. */
export function buildJobKey(name: string): string {
  return `Job/${name}`;
}
