/**
 * The Trigger reconciler: an http Trigger publishes its function's URL, a cron or amqp Trigger is
 * handed to the platform's scheduler (an amqp one also says where its failed messages end). It fills the status update the reconcile runtime writes once; what the
 * scheduler observed (the next run, the last run and its result) comes back from `apply`, so the
 * scheduler never writes status itself.
 */
import { asError } from '../../core/errors.js';
import type { ObjectStore, TriggerScheduler } from '../../core/interfaces.js';
import { ASYNC_DEFAULTS, attempts } from '../../core/invocations.js';
import { functionPath } from '../../core/naming.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import { Done, type Result } from '../runtime/patch.js';

export interface TriggerReconcileDeps {
  store: ObjectStore;
  scheduler: TriggerScheduler;
  externalUrl: string;
}

export async function reconcileTrigger(
  deps: TriggerReconcileDeps,
  trigger: Trigger,
  update: StatusUpdate<TriggerStatus>,
): Promise<Result> {
  const { namespace } = trigger.metadata;
  const fn = (await deps.store.get('Function', namespace, trigger.spec.function)) as
    | SlessFunction
    | undefined;
  const disabled = trigger.spec.enabled === false;
  let ready = fn !== undefined;
  let reason: Reason = fn ? Reason.Scheduled : Reason.FunctionNotFound;
  let message = fn ? '' : `function "${trigger.spec.function}" not found`;
  if (trigger.spec.type === 'http') {
    await deps.scheduler.remove(namespace, trigger.metadata.name);
    const url = `${deps.externalUrl}${functionPath(namespace, trigger.spec.function)}`;
    update.status.url = url;
    if (fn && disabled) {
      // Any Trigger with enabled: false scales its function to zero in place (the Function reads
      // Disabled and its address answers 503); the http Trigger says so rather than that it serves.
      reason = Reason.Disabled;
      message = `disabled: the function is scaled to zero and ${url} answers 503 until it is enabled`;
    } else if (fn) {
      reason = Reason.Published;
      message = `serving at ${url}`;
    }
  } else {
    try {
      Object.assign(update.status, await deps.scheduler.apply(trigger, fn));
      if (fn) message = disabled ? 'disabled' : `next run ${update.status.nextRun ?? 'unknown'}`;
      if (fn && disabled) reason = Reason.Disabled;
      if (fn && !disabled && trigger.spec.type === 'amqp') {
        // A queue consumer is ready once it consumes; a broken connection is retried meanwhile.
        const failed = update.status.consumer === 'failed';
        ready = !failed;
        if (failed) reason = Reason.ScheduleFailed;
        message = failed
          ? `queue ${trigger.spec.queue}: ${update.status.lastError ?? 'not connected'}; retrying`
          : `queue ${trigger.spec.queue}: ${update.status.consumer ?? 'connecting'}`;
      }
    } catch (thrown) {
      ready = false;
      reason = Reason.ScheduleFailed;
      message = asError(thrown).message;
    }
  }
  update.status.phase = ready ? (disabled ? 'Disabled' : 'Ready') : 'Failed';
  update.set('Ready', ready, reason, message);
  if (trigger.spec.type === 'amqp') setDeadLetters(trigger, update);
  else update.remove('DeadLetters');
  return Done;
}

/**
 * Where an amqp Trigger's failed messages end. Without a deadLetterExchange the consumer rejects
 * them without requeue, and RabbitMQ drops them unless the queue has a dead-letter exchange of its
 * own, which sless cannot see: a condition says so, rather than the loss showing only in a count.
 */
function setDeadLetters(trigger: Trigger, update: StatusUpdate<TriggerStatus>): void {
  const { queue, deadLetterExchange } = trigger.spec;
  const budget = attempts(trigger.spec.maxAttempts ?? ASYNC_DEFAULTS.maxAttempts);
  if (deadLetterExchange)
    update.set(
      'DeadLetters',
      true,
      Reason.DeadLetterExchange,
      `a message failing ${budget} (or answered 4xx) is published to exchange ${deadLetterExchange}`,
    );
  else
    update.set(
      'DeadLetters',
      false,
      Reason.NoDeadLetterExchange,
      `no deadLetterExchange: a message failing ${budget} (or answered 4xx) is rejected ` +
        `without requeue, and RabbitMQ drops it unless queue ${queue} has its own dead-letter ` +
        'exchange (an x-dead-letter-exchange argument or policy)',
    );
}

/** The Trigger is gone: its schedule goes too. */
export function finalizeTrigger(deps: TriggerReconcileDeps, namespace: string, name: string): Promise<void> {
  return deps.scheduler.remove(namespace, name);
}
