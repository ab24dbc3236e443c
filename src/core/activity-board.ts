/**
 * In-flight requests and the time of the last one, per serving revision, in shared memory. The proxy
 * that counts a request may run on another thread (the gateway) than the platform that reads the
 * counts to drain a revision or to scale it to zero, so the counts cannot live in either thread's
 * objects. Slots are handed out by one thread (the platform's); any thread may count in them.
 */
export interface ActivityBoardMemory {
  inflight: SharedArrayBuffer;
  lastActivity: SharedArrayBuffer;
}

/** Revisions alive at once, old ones draining included: far above what one machine can run. */
const DEFAULT_CAPACITY = 65_536;

export class ActivityBoard {
  private readonly inflight: Int32Array;
  /** Date.now() of the last request's start or end. Written without Atomics: a late read only delays. */
  private readonly lastActivity: Float64Array;
  private readonly freed: number[] = [];
  private nextUnused = 0;

  constructor(
    readonly memory: ActivityBoardMemory = {
      inflight: new SharedArrayBuffer(DEFAULT_CAPACITY * Int32Array.BYTES_PER_ELEMENT),
      lastActivity: new SharedArrayBuffer(DEFAULT_CAPACITY * Float64Array.BYTES_PER_ELEMENT),
    },
  ) {
    this.inflight = new Int32Array(memory.inflight);
    this.lastActivity = new Float64Array(memory.lastActivity);
    if (this.inflight.length !== this.lastActivity.length)
      throw new Error('activity board: inflight and lastActivity differ in length');
  }

  /** A zeroed slot, or undefined when every slot is taken. */
  allocate(): number | undefined {
    const slot = this.freed.pop() ?? (this.nextUnused < this.inflight.length ? this.nextUnused++ : undefined);
    if (slot === undefined) return undefined;
    Atomics.store(this.inflight, slot, 0);
    this.lastActivity[slot] = Date.now();
    return slot;
  }

  /** The slot's revision is gone: no thread counts in it any more. */
  free(slot: number): void {
    this.freed.push(slot);
  }

  begin(slot: number): void {
    Atomics.add(this.inflight, slot, 1);
    this.lastActivity[slot] = Date.now();
  }

  end(slot: number): void {
    this.lastActivity[slot] = Date.now();
    if (Atomics.sub(this.inflight, slot, 1) === 1) Atomics.notify(this.inflight, slot);
  }

  inflightOf(slot: number): number {
    return Atomics.load(this.inflight, slot);
  }

  lastActivityOf(slot: number): number {
    return this.lastActivity[slot] as number;
  }

  /**
   * Resolves true once no request is in flight in `slot`, false if `timeoutMs` passes first. Woken by
   * the thread that ends the last request, without polling. An Atomics wait does not keep the process
   * alive; a timer does, unless `holdProcess` is false (a wait nothing else depends on).
   */
  async waitIdle(slot: number, timeoutMs: number, holdProcess = true): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const inflight = Atomics.load(this.inflight, slot);
      if (inflight === 0) return true;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      const wait = Atomics.waitAsync(this.inflight, slot, inflight, remaining);
      const keepAlive = setTimeout(() => undefined, remaining);
      if (!holdProcess) keepAlive.unref();
      try {
        if (wait.async) await wait.value;
      } finally {
        clearTimeout(keepAlive);
      }
    }
  }
}
