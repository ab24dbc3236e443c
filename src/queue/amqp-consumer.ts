/**
 * One amqp Trigger's consumer: a connection to RabbitMQ (amqplib), the queue declared durable and
 * optionally bound to an exchange, and each message delivered to the function as an HTTP POST of its
 * body. A 2xx acknowledges it; a 5xx, a timeout or no answer is retried with backoff up to
 * maxAttempts (a 4xx is final at once); then the message is published to the dead-letter exchange
 * and acknowledged, or rejected without requeue when there is none (the broker then drops it unless
 * the queue has a dead-letter policy of its own). Nothing is acknowledged before
 * its outcome, so a kill -9 leaves every message it held to the broker, which delivers it again.
 */
import amqp, { type ChannelModel, type ConfirmChannel, type ConsumeMessage } from 'amqplib';
import type { Logger } from 'pino';
import { attempts, retryDelayMs, verdictOf } from '../core/invocations.js';
import { withoutPassword } from '../core/redact-url.js';

export type ConsumerState = 'connecting' | 'consuming' | 'paused' | 'failed';

export interface QueueMessage {
  body: Buffer;
  contentType: string | undefined;
  messageId: string | undefined;
  routingKey: string;
  exchange: string;
  redelivered: boolean;
  attempt: number;
}

export interface AmqpConsumerOptions {
  /** `ns/name` of the Trigger, for logs. */
  trigger: string;
  url: string;
  queue: string;
  exchange?: string;
  routingKey?: string;
  deadLetterExchange?: string;
  maxAttempts: number;
  backoffMs: number;
  prefetch: number;
  /** Sends one message to the function; the status it answered, or undefined for no answer. */
  deliver(message: QueueMessage): Promise<{ status?: number; error?: string }>;
  logger: Logger;
  /** The consumer's state or counts changed (the Trigger's status follows). */
  onChange(): void;
}

export interface ConsumerReport {
  consumer: ConsumerState;
  lastMessage?: string;
  lastError?: string;
  acknowledged: number;
  deadLettered: number;
}

/** How long a broken connection waits before the next try, at most. */
const MAX_RECONNECT_MS = 30_000;

export class AmqpConsumer {
  private state: ConsumerState = 'connecting';
  private connection: ChannelModel | undefined;
  private channel: ConfirmChannel | undefined;
  private consumerTag: string | undefined;
  private stopped = false;
  private reconnects = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readonly handling = new Set<Promise<void>>();
  private lastMessage: string | undefined;
  private lastError: string | undefined;
  private acknowledged = 0;
  private deadLettered = 0;

  constructor(private readonly options: AmqpConsumerOptions) {}

  report(): ConsumerReport {
    return {
      consumer: this.state,
      ...(this.lastMessage ? { lastMessage: this.lastMessage } : {}),
      ...(this.lastError ? { lastError: this.lastError } : {}),
      acknowledged: this.acknowledged,
      deadLettered: this.deadLettered,
    };
  }

  start(): void {
    void this.connect();
  }

  /**
   * Stops consuming: the broker sends nothing more, messages being handled finish (and are
   * acknowledged or dead-lettered), and the connection closes. What was not delivered stays queued.
   */
  async stop(state: ConsumerState = 'paused'): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const { channel, consumerTag } = this;
    if (channel && consumerTag) await channel.cancel(consumerTag).catch(() => undefined);
    await Promise.all(this.handling);
    // The channel closes first, after its acks: closing only the connection let the broker requeue
    // a message acknowledged just before (seen on RabbitMQ 3.10 as the next leader receiving it
    // again, redelivered). A channel's close-ok comes after every frame sent on it was handled.
    await channel?.close().catch(() => undefined);
    await this.connection?.close().catch(() => undefined);
    this.connection = undefined;
    this.channel = undefined;
    this.setState(state);
  }

  /** The URL carries a password: no message that leaves here may contain it. */
  private redact(message: string): string {
    return withoutPassword(this.options.url, message);
  }

  private setState(state: ConsumerState, error?: string): void {
    this.state = state;
    if (error !== undefined) this.lastError = this.redact(error);
    this.options.onChange();
  }

  private async connect(): Promise<void> {
    const { options } = this;
    this.setState('connecting');
    try {
      const connection = await amqp.connect(options.url);
      if (this.stopped) {
        await connection.close();
        return;
      }
      this.connection = connection;
      connection.on('error', () => undefined);
      let channelError: Error | undefined;
      connection.on('close', (error?: Error) => this.lost(error ?? channelError));
      const channel = await connection.createConfirmChannel();
      channel.on('error', (error: Error) => {
        channelError = error;
      });
      // The broker closed the channel (a dead letter sent to an exchange that does not exist, say):
      // its unacknowledged messages went back to the queue and nothing more arrives on it, while the
      // connection stays up. Closing that too reconnects, with backoff, and the status says why.
      channel.on('close', () => {
        if (!this.stopped && this.channel === channel) void connection.close().catch(() => undefined);
      });
      await this.declare(connection, channel);
      await channel.prefetch(options.prefetch);
      this.channel = channel;
      const { consumerTag } = await channel.consume(options.queue, (message) => this.received(message), {
        noAck: false,
      });
      this.consumerTag = consumerTag;
      this.reconnects = 0;
      this.setState('consuming');
    } catch (error) {
      await this.connection?.close().catch(() => undefined);
      this.lost(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** The queue (durable) and its binding. A queue that exists already is used as it is. */
  private async declare(connection: ChannelModel, channel: ConfirmChannel): Promise<void> {
    const { queue, exchange, routingKey } = this.options;
    // checkQueue closes the channel it fails on: a scratch one tells whether the queue exists.
    const probe = await connection.createChannel();
    probe.on('error', () => undefined);
    const exists = await probe.checkQueue(queue).then(
      () => true,
      () => false,
    );
    if (exists) await probe.close().catch(() => undefined);
    if (!exists) await channel.assertQueue(queue, { durable: true });
    if (exchange) await channel.bindQueue(queue, exchange, routingKey ?? '');
  }

  private lost(error?: Error): void {
    this.connection = undefined;
    this.channel = undefined;
    this.consumerTag = undefined;
    if (this.stopped) return;
    this.setState('failed', error?.message ?? 'the connection to RabbitMQ closed');
    const delay = Math.min(MAX_RECONNECT_MS, 500 * 2 ** this.reconnects++);
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
  }

  private received(message: ConsumeMessage | null): void {
    // null: the broker cancelled the consumer (the queue was deleted).
    if (!message) {
      this.lost(new Error(`queue ${this.options.queue} was deleted or the consumer was cancelled`));
      return;
    }
    const channel = this.channel;
    if (!channel) return;
    const handling = this.handle(channel, message)
      .catch((error: Error) => {
        // The channel went away with the message unacknowledged: the broker delivers it again.
        this.lastError = this.redact(error.message);
      })
      .finally(() => {
        this.handling.delete(handling);
        this.options.onChange();
      });
    this.handling.add(handling);
  }

  private async handle(channel: ConfirmChannel, message: ConsumeMessage): Promise<void> {
    const { options } = this;
    const at = new Date().toISOString();
    let last: { status?: number; error?: string } = {};
    let attempt = 0;
    while (attempt < options.maxAttempts) {
      attempt++;
      last = await options.deliver({
        body: message.content,
        contentType: message.properties.contentType as string | undefined,
        messageId: message.properties.messageId as string | undefined,
        routingKey: message.fields.routingKey,
        exchange: message.fields.exchange,
        redelivered: message.fields.redelivered,
        attempt,
      });
      const verdict = verdictOf(last.status);
      if (verdict === 'succeeded') {
        channel.ack(message);
        this.acknowledged++;
        this.lastMessage = `${at}: acknowledged after ${attempts(attempt)}`;
        return;
      }
      if (verdict === 'failed') break;
      if (attempt < options.maxAttempts && !this.stopped)
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs(options.backoffMs, attempt + 1)));
      // Paused while retrying: the message goes back to the queue untouched, for the next consumer.
      if (this.stopped) {
        channel.nack(message, false, true);
        this.lastMessage = `${at}: requeued after ${attempts(attempt)} (the trigger stopped)`;
        return;
      }
    }
    const why = last.status !== undefined ? `status ${last.status}` : (last.error ?? 'no answer');
    this.lastError = this.redact(
      attempt === 1
        ? `message failed 1 attempt, with ${why}`
        : `message failed ${attempts(attempt)}, the last with ${why}`,
    );
    if (options.deadLetterExchange) {
      channel.publish(options.deadLetterExchange, message.fields.routingKey, message.content, {
        ...message.properties,
        persistent: true,
        headers: {
          ...(message.properties.headers ?? {}),
          'x-sless-attempts': attempt,
          'x-sless-last-error': why,
          'x-sless-queue': options.queue,
        },
      });
      // Acknowledged only once the broker confirmed the dead letter: a kill in between delivers the
      // message again rather than losing it.
      await channel.waitForConfirms();
      channel.ack(message);
      this.lastMessage = `${at}: dead-lettered after ${attempts(attempt)} (${why})`;
    } else {
      // Nowhere to keep it: the broker drops it, or routes it by the queue's own dead-letter policy.
      channel.nack(message, false, false);
      options.logger.warn(
        { trigger: options.trigger, queue: options.queue, attempts: attempt, why },
        'message rejected without requeue: the trigger has no deadLetterExchange',
      );
      this.lastMessage = `${at}: rejected without requeue after ${attempts(attempt)} (${why}); no deadLetterExchange`;
    }
    this.deadLettered++;
  }
}
