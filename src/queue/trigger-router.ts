/**
 * The one TriggerScheduler the controller sees: cron Triggers go to the platform's scheduler, amqp
 * Triggers to the queue consumers. A Trigger whose type changed is removed from the other, so it
 * never runs as both.
 */
import type { TriggerScheduler } from '../core/interfaces.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../core/resources.js';

export class TriggerRouter implements TriggerScheduler {
  constructor(
    private readonly cron: TriggerScheduler,
    private readonly queues: TriggerScheduler,
  ) {}

  async apply(trigger: Trigger, fn: SlessFunction | undefined): Promise<TriggerStatus> {
    const { namespace, name } = trigger.metadata;
    if (trigger.spec.type === 'amqp') {
      await this.cron.remove(namespace, name);
      return this.queues.apply(trigger, fn);
    }
    await this.queues.remove(namespace, name);
    return this.cron.apply(trigger, fn);
  }

  async remove(namespace: string, name: string): Promise<void> {
    await Promise.all([this.cron.remove(namespace, name), this.queues.remove(namespace, name)]);
  }
}
