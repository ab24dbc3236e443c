/**
 * Fair shares in front of the expensive work (function reconciles and their builds). A fixed number
 * of tasks run at once; when a slot frees, the next task is chosen by:
 *
 *   1. class: a change to a function that is running now goes ahead of functions never deployed
 *      (a cold backlog), so fixing what serves is never stuck behind what does not yet;
 *   2. tenant: the namespace with the fewest tasks running, then the one served longest ago, so one
 *      namespace's backlog delays another's work by at most the tasks already running;
 *   3. flow: within a namespace, the source served longest ago, for the same reason between sources;
 *   4. FIFO within one flow.
 *
 * It knows nothing of reconciles: the controller passes what each task is for. It sits in front of
 * the work queue rather than inside it, so the queue keeps its own job (one worker per key).
 */
export interface FairTask {
  /** The namespace: the unit of fairness. */
  tenant: string;
  /** The source inside the namespace (or any other sub-flow). */
  flow: string;
  /** True for work on something serving now; it goes before cold work. */
  warm: boolean;
}

interface Waiter {
  task: FairTask;
  start: () => void;
  cancel: (error: Error) => void;
}

export class GateStoppedError extends Error {
  constructor() {
    super('stopped before its turn');
  }
}

export class FairGate {
  private readonly slots: number;
  private running = 0;
  private readonly runningByTenant = new Map<string, number>();
  /** Waiters per class (warm first), per tenant, per flow, FIFO. */
  private readonly waiting: [Map<string, Map<string, Waiter[]>>, Map<string, Map<string, Waiter[]>>] = [
    new Map(),
    new Map(),
  ];
  /** A counter rather than time, so ties break the same way on every run. */
  private tick = 0;
  private stopped = false;
  private readonly lastServedTenant = new Map<string, number>();
  private readonly lastServedFlow = new Map<string, number>();

  constructor(options: { slots: number }) {
    this.slots = Math.max(1, options.slots);
  }

  /** Runs `work` when the task's turn comes; resolves or rejects with it. */
  async run<T>(task: FairTask, work: () => Promise<T>): Promise<T> {
    await new Promise<void>((start, cancel) => {
      if (this.stopped) return cancel(new GateStoppedError());
      const byTenant = this.waiting[task.warm ? 0 : 1];
      let flows = byTenant.get(task.tenant);
      if (!flows) {
        flows = new Map();
        byTenant.set(task.tenant, flows);
      }
      let queue = flows.get(task.flow);
      if (!queue) {
        queue = [];
        flows.set(task.flow, queue);
      }
      queue.push({ task, start, cancel });
      this.pump();
    });
    try {
      return await work();
    } finally {
      this.running--;
      const left = (this.runningByTenant.get(task.tenant) ?? 1) - 1;
      if (left === 0) this.runningByTenant.delete(task.tenant);
      else this.runningByTenant.set(task.tenant, left);
      this.pump();
    }
  }

  /** Waiting tasks never start; they reject with GateStoppedError. Running ones finish. */
  stop(): void {
    this.stopped = true;
    for (const byTenant of this.waiting) {
      for (const flows of byTenant.values())
        for (const queue of flows.values()) for (const waiter of queue) waiter.cancel(new GateStoppedError());
      byTenant.clear();
    }
  }

  /** Tasks waiting for a slot. */
  get waitingCount(): number {
    let count = 0;
    for (const byTenant of this.waiting)
      for (const flows of byTenant.values()) for (const queue of flows.values()) count += queue.length;
    return count;
  }

  private pump(): void {
    while (this.running < this.slots) {
      const next = this.next();
      if (!next) return;
      this.running++;
      this.runningByTenant.set(next.task.tenant, (this.runningByTenant.get(next.task.tenant) ?? 0) + 1);
      next.start();
    }
  }

  private next(): Waiter | undefined {
    for (const byTenant of this.waiting) {
      if (byTenant.size === 0) continue;
      const tenant = this.pick([...byTenant.keys()], (t) => [
        this.runningByTenant.get(t) ?? 0,
        this.lastServedTenant.get(t) ?? -1,
      ]);
      const flows = byTenant.get(tenant) as Map<string, Waiter[]>;
      const flow = this.pick([...flows.keys()], (f) => [0, this.lastServedFlow.get(`${tenant}/${f}`) ?? -1]);
      const queue = flows.get(flow) as Waiter[];
      const waiter = queue.shift() as Waiter;
      if (queue.length === 0) flows.delete(flow);
      if (flows.size === 0) byTenant.delete(tenant);
      this.tick++;
      this.lastServedTenant.set(tenant, this.tick);
      this.lastServedFlow.set(`${tenant}/${flow}`, this.tick);
      return waiter;
    }
    return undefined;
  }

  /** The key with the smallest [primary, secondary]; names break ties so the order is stable. */
  private pick(keys: string[], rank: (key: string) => [number, number]): string {
    let best = keys[0] as string;
    let bestRank = rank(best);
    for (const key of keys.slice(1)) {
      const r = rank(key);
      if (
        r[0] < bestRank[0] ||
        (r[0] === bestRank[0] && (r[1] < bestRank[1] || (r[1] === bestRank[1] && key < best)))
      ) {
        best = key;
        bestRank = r;
      }
    }
    return best;
  }
}
