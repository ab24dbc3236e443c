/**
 * One replica reconciles; every replica serves. `Leadership` is what the rest of the code asks
 * ("may I reconcile now?"), and `LeaderTasks` starts the leader-only work when this replica becomes
 * the leader and stops it the moment it stops being one. Local mode has one process, always leader.
 */

export interface LeaderInfo {
  /** This replica's identity (the pod name on kube). */
  identity: string;
  /** Who holds the lease now, as last observed; undefined when nobody does. */
  holder: string | undefined;
  isLeader: boolean;
}

export interface Leadership {
  /** True while this replica holds the lease; leader-only work checks it before each step. */
  isLeader(): boolean;
  info(): LeaderInfo;
}

/** client-go's leader-election periods; the renew deadline is shorter than the lease duration. */
export interface LeaderElectionTiming {
  /** How long followers wait after the last renewal they saw before taking over (client-go: 15 s). */
  leaseDurationMs: number;
  /** How long the leader keeps leading without a successful renewal (client-go: 10 s). */
  renewDeadlineMs: number;
  /** How often every candidate tries to acquire or renew (client-go: 2 s). */
  retryPeriodMs: number;
}

export const DEFAULT_LEADER_TIMING: LeaderElectionTiming = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** What a leader-only task's start returns: how to stop it. */
export type StopTask = () => void | Promise<void>;

/**
 * Leader-only work, started in registration order on becoming leader and stopped in reverse order on
 * losing the lease (or on shutdown). Starts and stops never overlap: a term that ends while its start
 * is still running stops right after that start.
 */
export class LeaderTasks {
  private readonly tasks: { name: string; start: () => StopTask | Promise<StopTask> }[] = [];
  private running: { name: string; stop: StopTask }[] = [];
  private chain: Promise<void> = Promise.resolve();
  private readonly onError: (task: string, error: unknown) => void;

  constructor(options: { onError: (task: string, error: unknown) => void }) {
    this.onError = options.onError;
  }

  /** Registers work that must run only on the leader (reconcile loops, drift watches, GC, idle scale-down). */
  register(name: string, start: () => StopTask | Promise<StopTask>): void {
    this.tasks.push({ name, start });
  }

  /** Runs every task's start; resolves once all have started. */
  startAll(): Promise<void> {
    return this.enqueue(async () => {
      if (this.running.length > 0) return;
      for (const task of this.tasks) {
        try {
          this.running.push({ name: task.name, stop: await task.start() });
        } catch (error) {
          this.onError(task.name, error);
        }
      }
    });
  }

  /** Stops what runs, newest first; resolves once all have stopped. */
  stopAll(): Promise<void> {
    return this.enqueue(async () => {
      const running = this.running.reverse();
      this.running = [];
      for (const task of running) {
        try {
          await task.stop();
        } catch (error) {
          this.onError(task.name, error);
        }
      }
    });
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(step);
    return this.chain;
  }
}

/** The single process of local mode leads always. */
export const ALWAYS_LEADER: Leadership = {
  isLeader: () => true,
  info: () => ({ identity: 'local', holder: 'local', isLeader: true }),
};
