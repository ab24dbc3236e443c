/**
 * amqp Triggers as a TriggerScheduler: one consumer per enabled Trigger, its connection URL read
 * from a secret of the Trigger's own namespace, its messages delivered through sless's `/fn/`
 * endpoint (routing, wake-up, admission and the function's timeout, as for any caller). A disabled
 * Trigger, or one whose function is missing, consumes nothing and leaves its messages queued. The
 * consumers report to the Trigger's status through `apply`; they never write status themselves.
 */

import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import { timeoutSecOf } from '../core/defaults.js';
import { SlessError } from '../core/errors.js';
import type { TriggerScheduler } from '../core/interfaces.js';
import { ASYNC_DEFAULTS } from '../core/invocations.js';
import { objectKey } from '../core/object-key.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../core/resources.js';
import { Reason } from '../core/status.js';
import type { SecretReader } from '../secrets/references.js';
import { AmqpConsumer, type QueueMessage } from './amqp-consumer.js';

export interface QueueTriggersOptions {
  secrets: SecretReader;
  logger: Logger;
  /** Where this sless's /fn/ answers; undefined until it listens. */
  origin(): string | undefined;
  /** A Trigger's consumer changed: its reconcile reads the new status through `apply`. */
  onChanged(namespace: string, name: string): void;
}

/** A secret or key that is not there: the Trigger says so and consumes nothing. */
export class QueueSecretError extends SlessError {
  constructor(message: string) {
    super(message, { reason: Reason.SecretNotFound });
  }
}

const DEFAULT_PREFETCH = 8;
/** Status changes of one Trigger are reported at most this often (a busy queue changes per message). */
const REPORT_EVERY_MS = 500;

export class QueueTriggers implements TriggerScheduler {
  private readonly consumers = new Map<string, { consumer: AmqpConsumer; signature: string }>();
  private readonly reportTimers = new Map<string, NodeJS.Timeout>();
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 64 });
  private stopped = false;

  constructor(private readonly options: QueueTriggersOptions) {}

  async apply(trigger: Trigger, fn: SlessFunction | undefined): Promise<TriggerStatus> {
    const { namespace, name } = trigger.metadata;
    const key = objectKey(namespace, name);
    const { spec } = trigger;
    // Stopped (sless stopping, or on kube the leader term ending): nothing starts consuming again.
    if (!fn || spec.enabled === false || this.stopped) {
      await this.remove(namespace, name);
      return { consumer: 'paused' };
    }
    const url = await this.connectionUrl(trigger);
    const signature = createHash('sha256')
      .update(JSON.stringify([spec, url, timeoutSecOf(fn)]))
      .digest('hex');
    const existing = this.consumers.get(key);
    if (existing?.signature === signature) return { ...existing.consumer.report() };
    if (existing) await this.stopConsumer(key);
    if (this.stopped) return { consumer: 'paused' };
    const timeoutSec = timeoutSecOf(fn);
    const consumer = new AmqpConsumer({
      trigger: key,
      url,
      queue: spec.queue ?? '',
      ...(spec.exchange ? { exchange: spec.exchange } : {}),
      ...(spec.routingKey !== undefined ? { routingKey: spec.routingKey } : {}),
      ...(spec.deadLetterExchange ? { deadLetterExchange: spec.deadLetterExchange } : {}),
      maxAttempts: spec.maxAttempts ?? ASYNC_DEFAULTS.maxAttempts,
      backoffMs: ASYNC_DEFAULTS.backoffMs,
      prefetch: spec.prefetch ?? DEFAULT_PREFETCH,
      deliver: (message) => this.deliver(namespace, name, spec.function, timeoutSec, message),
      logger: this.options.logger,
      onChange: () => this.report(namespace, name),
    });
    this.consumers.set(key, { consumer, signature });
    consumer.start();
    return { ...consumer.report() };
  }

  async remove(namespace: string, name: string): Promise<void> {
    await this.stopConsumer(objectKey(namespace, name));
  }

  /** Stops every consumer, for good: a later apply consumes nothing. */
  async stopAll(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.consumers.keys()].map((key) => this.stopConsumer(key)));
    for (const timer of this.reportTimers.values()) clearTimeout(timer);
    this.reportTimers.clear();
    await this.agent.close();
  }

  private async stopConsumer(key: string): Promise<void> {
    const entry = this.consumers.get(key);
    if (!entry) return;
    this.consumers.delete(key);
    await entry.consumer.stop();
  }

  private report(namespace: string, name: string): void {
    const key = objectKey(namespace, name);
    if (this.reportTimers.has(key)) return;
    const timer = setTimeout(() => {
      this.reportTimers.delete(key);
      this.options.onChanged(namespace, name);
    }, REPORT_EVERY_MS);
    timer.unref();
    this.reportTimers.set(key, timer);
  }

  private async connectionUrl(trigger: Trigger): Promise<string> {
    const { namespace } = trigger.metadata;
    const ref = trigger.spec.secretRef;
    if (!ref) throw new QueueSecretError('spec.secretRef: an amqp trigger needs the secret holding its URL');
    const key = ref.key ?? 'url';
    const secret = await this.options.secrets.get(namespace, ref.name);
    if (!secret) throw new QueueSecretError(`spec.secretRef: secret ${namespace}/${ref.name} not found`);
    const value = secret.data[key];
    if (!value)
      throw new QueueSecretError(`spec.secretRef: secret ${namespace}/${ref.name} has no key "${key}"`);
    const url = Buffer.from(value).toString('utf8').trim();
    if (!/^amqps?:\/\//.test(url))
      throw new QueueSecretError(
        `spec.secretRef: key "${key}" of secret ${namespace}/${ref.name} is not an amqp:// or amqps:// URL`,
      );
    return url;
  }

  private async deliver(
    namespace: string,
    trigger: string,
    fn: string,
    timeoutSec: number,
    message: QueueMessage,
  ): Promise<{ status?: number; error?: string }> {
    const origin = this.options.origin();
    if (!origin) return { error: 'sless is not listening yet' };
    const limit = timeoutSec * 1000 + 10_000;
    try {
      const response = await request(`${origin}/fn/${namespace}/${fn}/`, {
        method: 'POST',
        headers: {
          'content-type': message.contentType ?? 'application/octet-stream',
          'x-sless-trigger': trigger,
          'x-sless-attempt': String(message.attempt),
          'x-sless-amqp-routing-key': message.routingKey,
          'x-sless-amqp-redelivered': String(message.redelivered),
          ...(message.exchange ? { 'x-sless-amqp-exchange': message.exchange } : {}),
          ...(message.messageId ? { 'x-sless-message-id': message.messageId } : {}),
        },
        body: message.body,
        dispatcher: this.agent,
        headersTimeout: limit,
        bodyTimeout: limit,
      });
      await response.body.dump();
      return { status: response.statusCode };
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  }
}
