/**
 * The kube platform's InvocationStore: a RabbitMQ stream (an append-only, replicated, persistent
 * queue) as the journal of asynchronous invocations. Every put is one persistent message that the
 * broker confirmed before the put resolves, so the 202 and each attempt are never ahead of what a
 * restart or another replica finds. Every replica tails the stream from its first message into an
 * index in memory, which answers reads; the leader alone runs the workers. Nothing of it is written
 * to the Kubernetes API.
 *
 * The stream keeps messages for `maxAge` (whole segments expire, oldest first); the leader writes
 * every record still kept again before its last copy gets that old (`refresh`), and a swept record
 * gets a tombstone, so what survives of the stream always replays to the current records.
 *
 * The broker may be slow to accept (starting, or the machine loaded) or restart under us: `open`
 * tries again with bounded backoff, a lost connection or channel is opened again, and the tail
 * resumes at the offset after the last message it applied, so no entry is skipped and none is
 * applied twice. A write that was not confirmed is sent again once connected (a put is the whole
 * record, so a copy that did land twice changes nothing).
 */
import { randomUUID } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type ConsumeMessage } from 'amqplib';
import type { Logger } from 'pino';
import { SlessError } from '../../core/errors.js';
import type { InvocationStore } from '../../core/interfaces.js';
import {
  invocationKey,
  listRecords,
  recordOf,
  sweepableKeys,
  unfinishedRecords,
} from '../../core/invocation-records.js';
import type { InvocationRecord, InvocationState } from '../../core/invocations.js';
import { withoutPassword } from '../../core/redact-url.js';

/** The broker cannot be reached now, or did not confirm a write: nothing was stored. */
export class InvocationStoreUnavailableError extends SlessError {
  constructor(message: string, cause?: unknown) {
    // Not the 'Unavailable' category: the intake answers that with a 429 meant for a full backlog.
    super(message, { reason: 'Unavailable', category: 'Failed', cause });
  }
}

/** One journal entry: a record as it is now, a record's removal, or a replica's catch-up mark. */
type Entry = { put: InvocationRecord } | { delete: string } | { mark: string };

export interface StreamInvocationStoreOptions {
  /** amqp:// or amqps:// URL of the broker (it carries a password: never logged). */
  url: string;
  /** The stream's name. */
  stream: string;
  logger: Logger;
  /** How long the broker keeps a message (RabbitMQ's x-max-age, e.g. `7D`). */
  maxAge?: string;
  /** Segment size: retention removes whole segments only. */
  segmentBytes?: number;
  /** How long `open` keeps trying to reach the broker before it gives up (default 2 min). */
  openTimeoutMs?: number;
  /** How long a write keeps trying across reconnections before it fails (default 30 s). */
  writeTimeoutMs?: number;
}

const DEFAULT_MAX_AGE = '7D';
const DEFAULT_SEGMENT_BYTES = 32 * 1024 * 1024;
/** Messages the tail holds unacknowledged at once (a stream consumer needs a prefetch). */
const TAIL_PREFETCH = 500;
const FIRST_RETRY_MS = 200;
/** The longest wait between two tries of `open` or of a write. */
const MAX_RETRY_MS = 5_000;
const DEFAULT_OPEN_TIMEOUT_MS = 120_000;
const DEFAULT_WRITE_TIMEOUT_MS = 30_000;

/**
 * Whether a failure to reach the broker may pass by itself (not yet listening, a reset while it
 * starts or is loaded, a connection or channel closed under us); a refused login or a missing
 * stream does not.
 */
export function isTransientBrokerError(error: unknown): boolean {
  const cause = error instanceof InvocationStoreUnavailableError ? (error.cause ?? error) : error;
  const code = (cause as { code?: unknown } | undefined)?.code;
  if (
    typeof code === 'string' &&
    /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTCONN)$/.test(code)
  )
    return true;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (/ACCESS.REFUSED|NOT.FOUND|PRECONDITION.FAILED|NOT.ALLOWED/i.test(message)) return false;
  return /ECONNREFUSED|ECONNRESET|EPIPE|socket closed|connection closed|channel closed|closed abruptly|unexpected close|heartbeat timeout|not connected|CONNECTION.FORCED|nacked/i.test(
    message,
  );
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

const keyOf = invocationKey;

function decodeEntry(content: Buffer): Entry | undefined {
  try {
    const value = JSON.parse(content.toString('utf8')) as Record<string, unknown>;
    if (value.put && typeof value.put === 'object') {
      const record = value.put as InvocationRecord;
      if (typeof record.id === 'string' && typeof record.namespace === 'string') return { put: record };
    }
    if (typeof value.delete === 'string') return { delete: value.delete };
    if (typeof value.mark === 'string') return { mark: value.mark };
  } catch {
    // Not one of ours: skipped below.
  }
  return undefined;
}

export class StreamInvocationStore implements InvocationStore {
  private readonly records = new Map<string, InvocationRecord>();
  /** When each record was last written to the stream, as the stream's messages say. */
  private readonly writtenAt = new Map<string, number>();
  /** This replica's own last write of each key, whose older echoes must not undo it. */
  private readonly ownWrites = new Map<string, number>();
  private readonly marks = new Map<string, () => void>();
  private readonly writer = randomUUID();
  private sequence = 0;
  private connection: ChannelModel | undefined;
  private publisher: ConfirmChannel | undefined;
  /** The next stream offset the tail reads from. */
  private nextOffset: number | 'first' = 'first';
  private closed = false;
  private reconnects = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;

  private constructor(private readonly options: StreamInvocationStoreOptions) {}

  /**
   * Connects, declares the stream and reads it to its end. A broker not yet accepting, or resetting
   * the connection, is tried again with backoff until `openTimeoutMs`; a refused login fails at once.
   */
  static async open(options: StreamInvocationStoreOptions): Promise<StreamInvocationStore> {
    const store = new StreamInvocationStore(options);
    const deadline = Date.now() + (options.openTimeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS);
    try {
      await store.retrying('open', deadline, () => store.connect());
      await store.caughtUp(deadline);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  /**
   * Runs `step` until it passes, waiting longer each time (bounded), while its failure is transient
   * and the deadline is not past.
   */
  private async retrying<T>(what: string, deadline: number, step: () => Promise<T>): Promise<T> {
    for (let tries = 0; ; tries++) {
      try {
        return await step();
      } catch (error) {
        const wait = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** tries);
        if (this.closed || !isTransientBrokerError(error) || Date.now() + wait > deadline) throw error;
        this.options.logger.warn(
          { err: (error as Error).message, retryInMs: wait },
          `the invocation stream could not be reached (${what}); trying again`,
        );
        await sleep(wait);
      }
    }
  }

  /** The URL carries a password: no message that leaves here may contain it. */
  private redact(message: string): string {
    return withoutPassword(this.options.url, message);
  }

  private connect(): Promise<void> {
    this.connecting ??= this.connectOnce().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connectOnce(): Promise<void> {
    const { stream } = this.options;
    let connection: ChannelModel;
    try {
      connection = await amqp.connect(this.options.url);
    } catch (error) {
      throw new InvocationStoreUnavailableError(
        this.redact(`RabbitMQ cannot be reached: ${(error as Error).message}`),
        error,
      );
    }
    connection.on('error', () => undefined);
    try {
      await this.declare(connection);
      const publisher = await connection.createConfirmChannel();
      publisher.on('error', () => undefined);
      const tail = await connection.createChannel();
      tail.on('error', () => undefined);
      await tail.prefetch(TAIL_PREFETCH);
      // A channel the broker closed (an error on it) takes the connection along: one reconnection
      // path, which opens both channels again and resumes the tail where it stopped.
      const dropConnection = () => void connection.close().catch(() => undefined);
      await tail.consume(stream, (message) => this.received(tail, message, dropConnection), {
        noAck: false,
        arguments: { 'x-stream-offset': this.nextOffset },
      });
      if (this.closed) {
        await connection.close().catch(() => undefined);
        return;
      }
      this.connection = connection;
      this.publisher = publisher;
      this.reconnects = 0;
      connection.on('close', () => {
        if (this.connection === connection) this.lost();
      });
      publisher.on('close', dropConnection);
      tail.on('close', dropConnection);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw new InvocationStoreUnavailableError(
        this.redact(`the invocation stream ${stream} could not be opened: ${(error as Error).message}`),
        error,
      );
    }
  }

  /** The stream, made once; one that exists already (with other retention settings) is used as it is. */
  private async declare(connection: ChannelModel): Promise<void> {
    const { stream } = this.options;
    // A declaration that disagrees with the existing stream closes its channel: a scratch one.
    const scratch = await connection.createChannel();
    scratch.on('error', () => undefined);
    const made = await scratch
      .assertQueue(stream, {
        durable: true,
        arguments: {
          'x-queue-type': 'stream',
          'x-max-age': this.options.maxAge ?? DEFAULT_MAX_AGE,
          'x-stream-max-segment-size-bytes': this.options.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
        },
      })
      .then(
        () => true,
        () => false,
      );
    if (made) {
      await scratch.close().catch(() => undefined);
      return;
    }
    const check = await connection.createChannel();
    await check.checkQueue(stream);
    await check.close();
  }

  private lost(): void {
    this.connection = undefined;
    this.publisher = undefined;
    if (this.closed) return;
    this.options.logger.warn('the connection to the invocation stream closed; reconnecting');
    const retry = () => {
      const delay = Math.min(MAX_RETRY_MS, 250 * 2 ** this.reconnects++);
      this.reconnectTimer = setTimeout(() => {
        if (this.closed) return;
        this.connect().catch((error: Error) => {
          this.options.logger.warn({ err: error.message }, 'the invocation stream is still unreachable');
          retry();
        });
      }, delay);
      this.reconnectTimer.unref();
    };
    retry();
  }

  private received(tail: Channel, message: ConsumeMessage | null, dropConnection: () => void): void {
    // The broker cancelled the tail (the stream was deleted, or its leader moved): read it again.
    if (!message) {
      dropConnection();
      return;
    }
    const offset = message.properties.headers?.['x-stream-offset'];
    if (typeof offset === 'number') {
      // Already applied before a reconnection (a stream may deliver from the start of the chunk
      // holding the offset asked for).
      if (typeof this.nextOffset === 'number' && offset < this.nextOffset) {
        tail.ack(message);
        return;
      }
      this.nextOffset = offset + 1;
    }
    const entry = decodeEntry(message.content);
    if (entry) this.apply(entry, message);
    tail.ack(message);
  }

  private apply(entry: Entry, message: ConsumeMessage): void {
    if ('mark' in entry) {
      this.marks.get(entry.mark)?.();
      this.marks.delete(entry.mark);
      return;
    }
    const key = 'put' in entry ? keyOf(entry.put.namespace, entry.put.id) : entry.delete;
    const headers = message.properties.headers ?? {};
    if (headers['x-sless-writer'] === this.writer) {
      const own = this.ownWrites.get(key);
      // An echo of this replica's write older than its latest one, which is applied already.
      if (own !== undefined && Number(headers['x-sless-sequence']) < own) return;
      if (own !== undefined && Number(headers['x-sless-sequence']) === own) this.ownWrites.delete(key);
    }
    const at = typeof message.properties.timestamp === 'number' ? message.properties.timestamp : Date.now();
    if ('put' in entry) {
      this.records.set(key, entry.put);
      this.writtenAt.set(key, at);
    } else {
      this.records.delete(key);
      this.writtenAt.delete(key);
    }
  }

  /**
   * Appends one entry; resolves once the broker confirmed it. A write the broker did not confirm,
   * or could not take (disconnected), is sent again after reconnecting until the deadline; then it
   * rejects. The entry keeps its sequence number across tries, so an earlier try that did land is
   * the same write.
   */
  private async append(entry: Entry, key?: string, deadline?: number): Promise<number> {
    const sequence = ++this.sequence;
    const content = Buffer.from(JSON.stringify(entry));
    const until = deadline ?? Date.now() + (this.options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS);
    await this.retrying('write', until, () => this.publishOnce(content, sequence));
    if (key !== undefined) this.ownWrites.set(key, sequence);
    return sequence;
  }

  private async publishOnce(content: Buffer, sequence: number): Promise<void> {
    if (this.closed) throw new InvocationStoreUnavailableError('the invocation store is closed');
    if (!this.publisher) await this.connect();
    const publisher = this.publisher;
    if (!publisher) throw new InvocationStoreUnavailableError('RabbitMQ is not connected');
    await new Promise<void>((resolve, reject) => {
      try {
        publisher.publish(
          '',
          this.options.stream,
          content,
          {
            persistent: true,
            contentType: 'application/json',
            timestamp: Date.now(),
            headers: { 'x-sless-writer': this.writer, 'x-sless-sequence': sequence },
          },
          (error: unknown) =>
            error
              ? reject(
                  new InvocationStoreUnavailableError(
                    this.redact(`RabbitMQ did not confirm the write: ${String(error)}`),
                    error,
                  ),
                )
              : resolve(),
        );
      } catch (error) {
        reject(new InvocationStoreUnavailableError(this.redact(`the write failed: ${String(error)}`), error));
      }
    });
  }

  async put(record: InvocationRecord): Promise<void> {
    const copy = structuredClone(record);
    const key = keyOf(copy.namespace, copy.id);
    await this.append({ put: copy }, key);
    this.records.set(key, copy);
    this.writtenAt.set(key, Date.now());
  }

  async get(namespace: string, id: string): Promise<InvocationRecord | undefined> {
    return recordOf(this.records, namespace, id);
  }

  async list(
    namespace: string,
    options: { state?: InvocationState; limit?: number } = {},
  ): Promise<InvocationRecord[]> {
    return listRecords(this.records, namespace, options);
  }

  async unfinished(): Promise<InvocationRecord[]> {
    return unfinishedRecords(this.records);
  }

  async sweep(before: string): Promise<number> {
    const gone = sweepableKeys(this.records, before);
    for (const key of gone) {
      await this.append({ delete: key }, key);
      this.records.delete(key);
      this.writtenAt.delete(key);
    }
    return gone.length;
  }

  /**
   * Resolves once the tail has read everything written before this call, by this replica or any
   * other: a mark is appended and waited for. A new leader reads the records only after it.
   */
  async caughtUp(deadline?: number): Promise<void> {
    const mark = randomUUID();
    const seen = new Promise<void>((resolve) => this.marks.set(mark, resolve));
    try {
      await this.append({ mark }, undefined, deadline);
    } catch (error) {
      this.marks.delete(mark);
      throw error;
    }
    await seen;
  }

  /**
   * Writes again every record whose last copy in the stream is older than `olderThanMs`, so that
   * none of them is only in segments the broker's retention removes. Returns how many.
   */
  async refresh(olderThanMs: number, now = Date.now()): Promise<number> {
    let written = 0;
    for (const [key, at] of [...this.writtenAt]) {
      if (at >= now - olderThanMs) continue;
      const record = this.records.get(key);
      if (!record) continue;
      await this.put(record);
      written++;
    }
    return written;
  }

  /** How many records the index holds, for tests and metrics. */
  size(): number {
    return this.records.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await this.connecting?.catch(() => undefined);
    await this.connection?.close().catch(() => undefined);
    this.connection = undefined;
    this.publisher = undefined;
  }
}
