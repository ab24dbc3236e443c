/**
 * Work a reconcile starts and does not wait for (a build, a rollout): at most one task per key, its
 * outcome kept until the next reconcile of that key takes it, and the key handed back to the work
 * queue the moment the task ends. A reconcile thus returns while the task runs, and no worker of the
 * queue waits on a build or a rollout.
 */

export type TaskState<T> =
  /** `started`: this call started it (the reconcile tells so once, in an Event). */
  | { state: 'Running'; started: boolean }
  | { state: 'Succeeded'; value: T }
  | { state: 'Failed'; error: Error };

interface Task<T> {
  id: string;
  settled?: { ok: true; value: T } | { ok: false; error: Error };
  /** Asked for again while it ran: with `rerunWhenAskedAgain`, its success answers no one. */
  askedAgain?: boolean;
  /** What holds it now, in words for status, as the work last said (see `ensure`). */
  note?: string;
}

export interface InFlightOptions {
  /**
   * A success of a task that was asked for again while it ran is dropped, and the next ask starts the
   * task anew (failures are still handed out). For work that reads the world as it starts, such as a
   * rollout that puts back what drifted: what changed after it started is not covered by it.
   */
  rerunWhenAskedAgain?: boolean;
}

export class InFlight<T> {
  private readonly tasks = new Map<string, Task<T>>();
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  private stopped = false;
  private readonly onSettled: (key: string) => void;
  private readonly rerunWhenAskedAgain: boolean;

  /** `onSettled` re-enqueues the key; it is not called once stopped. */
  constructor(onSettled: (key: string) => void, options: InFlightOptions = {}) {
    this.onSettled = onSettled;
    this.rerunWhenAskedAgain = options.rerunWhenAskedAgain ?? false;
  }

  /**
   * The state of task `id` of `key`, starting it when nothing runs for the key. A finished task's
   * outcome is handed out once, then forgotten. While another task of the key runs, this one waits
   * (Running, not started): the end of that one re-enqueues the key, and the next call starts it.
   * `work` is given `note`, to say what holds it (a build pod that cannot pull its image, say), or
   * undefined once nothing does: each change re-enqueues the key, whose reconcile reads `noteOf`.
   */
  ensure(
    key: string,
    id: string,
    work: (note: (text: string | undefined) => void) => Promise<T>,
  ): TaskState<T> {
    const task = this.tasks.get(key);
    if (task && !task.settled) {
      if (task.id === id) task.askedAgain = true;
      return { state: 'Running', started: false };
    }
    const finished = this.take(key, id);
    if (finished) return finished;
    const started: Task<T> = { id };
    this.tasks.set(key, started);
    this.running++;
    const note = (text: string | undefined) => {
      if (started.settled || started.note === text) return;
      started.note = text;
      if (!this.stopped && this.tasks.get(key) === started) this.onSettled(key);
    };
    let running: Promise<T>;
    try {
      running = Promise.resolve(work(note));
    } catch (thrown) {
      running = Promise.reject(thrown);
    }
    void running
      .then(
        (value) => {
          started.settled = { ok: true, value };
        },
        (thrown: unknown) => {
          started.settled = {
            ok: false,
            error: thrown instanceof Error ? thrown : new Error(String(thrown)),
          };
        },
      )
      .finally(() => {
        this.running--;
        // Re-enqueued before idle() resolves, so a caller waiting for quiet sees the next pass.
        if (!this.stopped && this.tasks.get(key) === started) this.onSettled(key);
        if (this.running === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    return { state: 'Running', started: true };
  }

  /** The outcome of task `id` of `key` if it has finished, handed out once; undefined otherwise. */
  take(key: string, id: string): Exclude<TaskState<T>, { state: 'Running' }> | undefined {
    const task = this.tasks.get(key);
    if (!task?.settled || task.id !== id) return undefined;
    this.tasks.delete(key);
    if (task.settled.ok && task.askedAgain && this.rerunWhenAskedAgain) return undefined;
    return task.settled.ok
      ? { state: 'Succeeded', value: task.settled.value }
      : { state: 'Failed', error: task.settled.error };
  }

  /** What holds the running task of `key`, as its work last said; undefined when nothing does. */
  noteOf(key: string): string | undefined {
    const task = this.tasks.get(key);
    return task?.settled ? undefined : task?.note;
  }

  /** True while a task of `key` runs. */
  isRunning(key: string): boolean {
    const task = this.tasks.get(key);
    return task !== undefined && task.settled === undefined;
  }

  /** Drops a finished outcome nobody will take (the state it led to was observed another way). */
  forget(key: string): void {
    if (this.tasks.get(key)?.settled) this.tasks.delete(key);
  }

  /** Resolves when no task runs. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  get size(): number {
    return this.running;
  }

  /** No more re-enqueues: the controller stopped. Running tasks end by themselves. */
  stop(): void {
    this.stopped = true;
  }
}
