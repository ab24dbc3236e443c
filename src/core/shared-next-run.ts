/**
 * Runs of an idempotent task per key, shared by the callers that ask while one is under way: they
 * all wait for one more run, started once the current one ends. Each caller's promise settles with a
 * run that began after it asked, so sharing never hands anyone an answer older than its question,
 * and N callers at once cost two runs, not N.
 */
export class SharedNextRun<K> {
  private readonly running = new Map<K, Promise<void>>();
  private readonly queued = new Map<K, Promise<void>>();

  run(key: K, task: () => Promise<void>): Promise<void> {
    const queued = this.queued.get(key);
    if (queued) return queued;
    const current = this.running.get(key);
    if (!current) return this.start(key, task);
    const next = current
      .catch(() => undefined)
      .then(() => {
        this.queued.delete(key);
        return this.start(key, task);
      });
    this.queued.set(key, next);
    return next;
  }

  private start(key: K, task: () => Promise<void>): Promise<void> {
    const run = Promise.resolve()
      .then(task)
      .finally(() => {
        if (this.running.get(key) === run) this.running.delete(key);
      });
    this.running.set(key, run);
    return run;
  }
}
