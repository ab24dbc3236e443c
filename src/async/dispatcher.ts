/**
 * The asynchronous invocation workers: they accept an invocation (durably, before its 202), deliver
 * it to its function with bounded concurrency (per function, and overall, taken round-robin so one
 * function's backlog never starves another's), retry what may pass with backoff, end it succeeded,
 * failed or dead-lettered, and send its result to a callback. Every attempt is recorded before it
 * starts and after it ends; a start resumes what a stop or a kill -9 interrupted.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ConflictError, NotFoundError, SlessError } from '../core/errors.js';
import type { InvocationStore } from '../core/interfaces.js';
import {
  ASYNC_DEFAULTS,
  FINAL_STATES,
  type InvocationAttempt,
  type InvocationRecord,
  type InvocationResult,
  retryDelayMs,
  type StoredRequest,
  verdictOf,
} from '../core/invocations.js';

/** What one delivery answered: a status (and the answer's start), or no answer at all. */
export interface DeliveryOutcome {
  status?: number;
  result?: InvocationResult;
  error?: string;
}

export interface DeliveryTarget {
  record: InvocationRecord;
  attempt: number;
  timeoutSec: number;
  signal: AbortSignal;
}

/** A function's settings as the workers use them; undefined: the function is gone. */
export interface AsyncSettings {
  timeoutSec: number;
  maxAttempts: number;
  backoffMs: number;
  concurrency: number;
}

export interface AsyncDispatcherOptions {
  store: InvocationStore;
  logger: Logger;
  settings(namespace: string, name: string): Promise<AsyncSettings | undefined>;
  deliver(target: DeliveryTarget): Promise<DeliveryOutcome>;
  /** Sends a final record to its callback URL; resolves with what happened, never rejects. */
  callback(record: InvocationRecord): Promise<{ status?: number; error?: string }>;
  /** Attempts in flight at once over every function. */
  concurrency?: number;
  /** Invocations not yet ended that one namespace may have; beyond them, new ones are refused. */
  maxOpenPerNamespace?: number;
  /** How long ended invocations stay readable (dead letters stay until replayed). */
  retentionMs?: number;
  now?: () => number;
  random?: () => number;
}

/** A namespace at its limit of open invocations: the client may try again once some have ended. */
export class InvocationBacklogError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'Unavailable', category: 'Unavailable' });
  }
}

export interface AcceptInput {
  namespace: string;
  function: string;
  request: StoredRequest;
  callbackUrl?: string;
}

interface FunctionLane {
  ready: string[];
  running: number;
  concurrency: number;
}

function keyOf(namespace: string, id: string): string {
  return `${namespace}/${id}`;
}

/** Attempts that count against the budget: an interrupted one was sless's doing, not the function's. */
function countedAttempts(record: InvocationRecord): number {
  return record.attempts.filter((a) => !a.interrupted).length;
}

export class AsyncDispatcher {
  private readonly options: AsyncDispatcherOptions;
  /** Invocations not ended, as last written: the workers' own copy, the store's mirror. */
  private readonly open = new Map<string, InvocationRecord>();
  private readonly openPerNamespace = new Map<string, number>();
  private readonly lanes = new Map<string, FunctionLane>();
  /** Functions with ready work, in the order they are served next. */
  private readonly rotation: string[] = [];
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Keys waiting in a lane for their turn. */
  private readonly ready = new Set<string>();
  private readonly inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private running = 0;
  private started = false;
  private stopping = false;
  private sweeper: NodeJS.Timeout | undefined;
  private readonly callbacks = new Set<Promise<void>>();

  constructor(options: AsyncDispatcherOptions) {
    this.options = options;
  }

  private get now(): number {
    return (this.options.now ?? Date.now)();
  }

  private get concurrency(): number {
    return this.options.concurrency ?? 32;
  }

  /** Resumes what the last run left: interrupted attempts are queued again, pending callbacks sent. */
  async start(): Promise<void> {
    for (const record of await this.options.store.unfinished()) {
      // Accepted since this process started: already queued here.
      if (this.open.has(keyOf(record.namespace, record.id))) continue;
      if (FINAL_STATES.has(record.state)) {
        this.sendCallback(record);
        continue;
      }
      if (record.state === 'running') {
        const last = record.attempts.at(-1);
        if (last && last.finishedAt === undefined)
          Object.assign(last, { interrupted: true, error: 'sless stopped during this attempt' });
        record.state = 'queued';
        record.nextAttemptAt = new Date(this.now).toISOString();
        record.updatedAt = record.nextAttemptAt;
        await this.options.store.put(record);
      }
      this.track(record);
    }
    this.started = true;
    this.pump();
    const retention = this.options.retentionMs ?? 24 * 3600_000;
    this.sweeper = setInterval(
      () => {
        void this.options.store
          .sweep(new Date(this.now - retention).toISOString())
          .catch((error: Error) =>
            this.options.logger.warn({ err: error.message }, 'ended invocations could not be removed'),
          );
      },
      Math.min(retention, 60_000),
    );
    this.sweeper.unref();
  }

  /** Stores the invocation and queues it; resolves once it is durable (the 202 may go out). */
  async accept(input: AcceptInput, settings: AsyncSettings): Promise<InvocationRecord> {
    if (this.stopping) throw new InvocationBacklogError('sless is stopping; try again');
    const limit = this.options.maxOpenPerNamespace ?? 10_000;
    const open = this.openPerNamespace.get(input.namespace) ?? 0;
    if (open >= limit)
      throw new InvocationBacklogError(
        `namespace ${input.namespace} has ${open} invocations not yet ended, the most it may have; try again later`,
      );
    const at = new Date(this.now).toISOString();
    const record: InvocationRecord = {
      id: randomUUID(),
      namespace: input.namespace,
      function: input.function,
      state: 'queued',
      createdAt: at,
      updatedAt: at,
      request: input.request,
      maxAttempts: settings.maxAttempts,
      backoffMs: settings.backoffMs,
      attempts: [],
      nextAttemptAt: at,
      ...(input.callbackUrl ? { callback: { url: input.callbackUrl, state: 'pending' as const } } : {}),
    };
    this.laneOf(record).concurrency = settings.concurrency;
    // Counted before the write: concurrent accepts of a namespace at its limit cannot all pass.
    this.openPerNamespace.set(input.namespace, open + 1);
    try {
      await this.options.store.put(record);
    } catch (error) {
      this.openPerNamespace.set(input.namespace, (this.openPerNamespace.get(input.namespace) ?? 1) - 1);
      throw error;
    }
    this.openPerNamespace.set(input.namespace, (this.openPerNamespace.get(input.namespace) ?? 1) - 1);
    this.track(record);
    this.pump();
    return structuredClone(record);
  }

  /** Queues a failed or dead-lettered invocation again, with a fresh attempt budget. */
  async replay(namespace: string, id: string): Promise<InvocationRecord> {
    const record = await this.options.store.get(namespace, id);
    if (!record) throw new NotFoundError(`invocation ${namespace}/${id} not found`);
    if (record.state !== 'dead-lettered' && record.state !== 'failed')
      throw new ConflictError(
        `invocation ${namespace}/${id} is ${record.state}; only failed or dead-lettered ones are replayed`,
      );
    const settings = await this.options.settings(namespace, record.function);
    if (!settings) throw new NotFoundError(`function ${namespace}/${record.function} no longer exists`);
    const at = new Date(this.now).toISOString();
    record.state = 'queued';
    record.maxAttempts = countedAttempts(record) + settings.maxAttempts;
    record.backoffMs = settings.backoffMs;
    record.nextAttemptAt = at;
    record.updatedAt = at;
    record.replays = (record.replays ?? 0) + 1;
    delete record.result;
    if (record.callback) record.callback = { url: record.callback.url, state: 'pending' };
    await this.options.store.put(record);
    this.track(record);
    this.pump();
    return structuredClone(record);
  }

  /** Stops starting attempts; those in flight are cut and queued again for the next start. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const { abort } of this.inFlight.values()) abort.abort(new Error('sless is stopping'));
    await Promise.all([...this.inFlight.values()].map((f) => f.done));
    await Promise.all(this.callbacks);
  }

  /** Open invocations per function key, for metrics and tests. */
  backlog(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const record of this.open.values()) {
      const key = `${record.namespace}/${record.function}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  }

  private laneOf(record: InvocationRecord): FunctionLane {
    const key = `${record.namespace}/${record.function}`;
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { ready: [], running: 0, concurrency: ASYNC_DEFAULTS.concurrency };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  private track(record: InvocationRecord): void {
    const key = keyOf(record.namespace, record.id);
    if (!this.open.has(key))
      this.openPerNamespace.set(record.namespace, (this.openPerNamespace.get(record.namespace) ?? 0) + 1);
    this.open.set(key, record);
    this.schedule(key, record);
  }

  private untrack(record: InvocationRecord): void {
    const key = keyOf(record.namespace, record.id);
    if (!this.open.delete(key)) return;
    const left = (this.openPerNamespace.get(record.namespace) ?? 1) - 1;
    if (left > 0) this.openPerNamespace.set(record.namespace, left);
    else this.openPerNamespace.delete(record.namespace);
  }

  private schedule(key: string, record: InvocationRecord): void {
    // Never twice: two attempts of one invocation at once could both succeed.
    if (this.stopping || this.timers.has(key) || this.ready.has(key)) return;
    const due = record.nextAttemptAt ? Date.parse(record.nextAttemptAt) - this.now : 0;
    if (due <= 0) {
      this.makeReady(key, record);
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.makeReady(key, record);
      this.pump();
    }, due);
    this.timers.set(key, timer);
  }

  private makeReady(key: string, record: InvocationRecord): void {
    this.ready.add(key);
    const lane = this.laneOf(record);
    lane.ready.push(key);
    const fnKey = `${record.namespace}/${record.function}`;
    if (!this.rotation.includes(fnKey)) this.rotation.push(fnKey);
  }

  /** Starts attempts while there is room: one per function in turn, each below its own limit. */
  private pump(): void {
    if (!this.started || this.stopping) return;
    let idleTurns = 0;
    while (this.running < this.concurrency && this.rotation.length > 0 && idleTurns < this.rotation.length) {
      const fnKey = this.rotation.shift() as string;
      const lane = this.lanes.get(fnKey);
      if (!lane || lane.ready.length === 0) {
        idleTurns = 0;
        continue;
      }
      if (lane.running >= lane.concurrency) {
        this.rotation.push(fnKey);
        idleTurns++;
        continue;
      }
      idleTurns = 0;
      const key = lane.ready.shift() as string;
      this.ready.delete(key);
      if (lane.ready.length > 0) this.rotation.push(fnKey);
      const record = this.open.get(key);
      if (!record) continue;
      this.running++;
      lane.running++;
      const abort = new AbortController();
      const done = this.attempt(record, abort.signal)
        .catch((error: Error) =>
          this.options.logger.error(
            { invocation: key, err: error.message },
            'an asynchronous invocation attempt could not be recorded',
          ),
        )
        .finally(() => {
          this.inFlight.delete(key);
          this.running--;
          lane.running--;
          // A function whose lane was full may go again now.
          if (lane.ready.length > 0 && !this.rotation.includes(fnKey)) this.rotation.push(fnKey);
          this.pump();
        });
      this.inFlight.set(key, { abort, done });
    }
  }

  private async attempt(record: InvocationRecord, signal: AbortSignal): Promise<void> {
    const { store } = this.options;
    const number = record.attempts.length + 1;
    const attempt: InvocationAttempt = { number, startedAt: new Date(this.now).toISOString() };
    record.attempts.push(attempt);
    record.state = 'running';
    delete record.nextAttemptAt;
    record.updatedAt = attempt.startedAt;
    // Recorded before it is sent: a kill now leaves a running attempt, which the next start retries.
    await store.put(record);
    const settings = await this.options.settings(record.namespace, record.function);
    if (settings) this.laneOf(record).concurrency = settings.concurrency;
    const outcome: DeliveryOutcome = settings
      ? await this.options.deliver({ record, attempt: number, timeoutSec: settings.timeoutSec, signal })
      : { status: 404, error: `function ${record.namespace}/${record.function} no longer exists` };
    const at = new Date(this.now).toISOString();
    record.updatedAt = at;
    if (signal.aborted && this.stopping) {
      // sless's stop cut it: the next start sends it again, and it costs the function no attempt.
      Object.assign(attempt, { interrupted: true, error: 'sless stopped during this attempt' });
      record.state = 'queued';
      record.nextAttemptAt = at;
      await store.put(record);
      return;
    }
    attempt.finishedAt = at;
    if (outcome.status !== undefined) attempt.status = outcome.status;
    if (outcome.error !== undefined) attempt.error = outcome.error;
    if (outcome.result) record.result = outcome.result;
    const verdict = verdictOf(outcome.status);
    if (verdict === 'retry' && countedAttempts(record) < record.maxAttempts) {
      record.state = 'queued';
      const delay = retryDelayMs(record.backoffMs, countedAttempts(record) + 1, this.options.random);
      record.nextAttemptAt = new Date(this.now + delay).toISOString();
      await store.put(record);
      this.schedule(keyOf(record.namespace, record.id), record);
      return;
    }
    record.state = verdict === 'retry' ? 'dead-lettered' : verdict;
    await store.put(record);
    this.untrack(record);
    if (record.state === 'dead-lettered')
      this.options.logger.warn(
        { invocation: record.id, function: `${record.namespace}/${record.function}`, attempts: number },
        'asynchronous invocation dead-lettered',
      );
    this.sendCallback(record);
  }

  private sendCallback(record: InvocationRecord): void {
    if (record.callback?.state !== 'pending') return;
    const sending = this.options
      .callback(record)
      .then(async (outcome) => {
        if (!record.callback) return;
        record.callback = {
          url: record.callback.url,
          state: outcome.status !== undefined && outcome.status < 400 ? 'sent' : 'failed',
          ...(outcome.status !== undefined ? { status: outcome.status } : {}),
          ...(outcome.error !== undefined ? { error: outcome.error } : {}),
        };
        record.updatedAt = new Date(this.now).toISOString();
        await this.options.store.put(record);
      })
      .catch((error: Error) =>
        this.options.logger.warn({ invocation: record.id, err: error.message }, 'callback not recorded'),
      )
      .finally(() => this.callbacks.delete(sending));
    this.callbacks.add(sending);
  }
}
