/**
 * In-flight requests and the time of the last one, per serving revision, in shared memory. The proxy
 * that counts a request may run on another thread (the gateway) than the platform that reads the
 * counts to drain a revision or to scale it to zero, so the counts cannot live in either thread's
 * objects. Slots are handed out by one thread (the platform's); any thread may count in them.
 */
export interface ActivityBoardMemory {
  inflight: SharedArrayBuffer;
  lastActivity: SharedArrayBuffer;
  /**
   * Per slot, the sum of request end times minus the sum of request start times (ms, 64-bit): with
   * the in-flight count it gives the request-milliseconds spent so far, so a reader can take the
   * time-weighted average of in-flight requests over any period from two readings.
   */
  busy: SharedArrayBuffer;
}

/** Revisions alive at once, old ones draining included: far above what one machine can run. */
const DEFAULT_CAPACITY = 65_536;

export class ActivityBoard {
  private readonly inflight: Int32Array;
  /** Date.now() of the last request's start or end. Written without Atomics: a late read only delays. */
  private readonly lastActivity: Float64Array;
  private readonly busy: BigInt64Array;
  private readonly freed: number[] = [];
  private nextUnused = 0;

  constructor(
    readonly memory: ActivityBoardMemory = {
      inflight: new SharedArrayBuffer(DEFAULT_CAPACITY * Int32Array.BYTES_PER_ELEMENT),
      lastActivity: new SharedArrayBuffer(DEFAULT_CAPACITY * Float64Array.BYTES_PER_ELEMENT),
      busy: new SharedArrayBuffer(DEFAULT_CAPACITY * BigInt64Array.BYTES_PER_ELEMENT),
    },
  ) {
    this.inflight = new Int32Array(memory.inflight);
    this.lastActivity = new Float64Array(memory.lastActivity);
    this.busy = new BigInt64Array(memory.busy);
    if (this.inflight.length !== this.lastActivity.length || this.inflight.length !== this.busy.length)
      throw new Error('activity board: inflight, lastActivity and busy differ in length');
  }

  /** A zeroed slot, or undefined when every slot is taken. */
  allocate(): number | undefined {
    const slot = this.freed.pop() ?? (this.nextUnused < this.inflight.length ? this.nextUnused++ : undefined);
    if (slot === undefined) return undefined;
    Atomics.store(this.inflight, slot, 0);
    Atomics.store(this.busy, slot, 0n);
    this.lastActivity[slot] = Date.now();
    return slot;
  }

  /** The slot's revision is gone: no thread counts in it any more. */
  free(slot: number): void {
    this.freed.push(slot);
  }

  begin(slot: number): void {
    const now = Date.now();
    Atomics.sub(this.busy, slot, BigInt(now));
    Atomics.add(this.inflight, slot, 1);
    this.lastActivity[slot] = now;
  }

  end(slot: number): void {
    const now = Date.now();
    this.lastActivity[slot] = now;
    Atomics.add(this.busy, slot, BigInt(now));
    if (Atomics.sub(this.inflight, slot, 1) === 1) Atomics.notify(this.inflight, slot);
  }

  /**
   * Request-milliseconds spent in `slot` up to `now` since it was allocated (ended requests' lengths
   * plus the in-flight ones' so far). Two readings, a period apart, give the period's time-weighted
   * in-flight average: (b − a) / period. Only differences mean anything; the value itself is exact
   * whichever thread counted.
   */
  busyMsOf(slot: number, now = Date.now()): number {
    const inflight = Atomics.load(this.inflight, slot);
    return Number(Atomics.load(this.busy, slot) + BigInt(inflight) * BigInt(now));
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
