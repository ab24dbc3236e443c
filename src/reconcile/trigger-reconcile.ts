import { asError } from '../core/errors.js';
import type { ObjectStore, TriggerScheduler } from '../core/interfaces.js';
import { functionPath } from '../core/naming.js';
import type { SlessFunction, TriggerStatus } from '../core/resources.js';
import { Reason, StatusUpdate } from '../core/status.js';

export interface TriggerReconcileDeps {
  store: ObjectStore;
  scheduler: TriggerScheduler;
  externalUrl: string;
}

/** http triggers publish the function's URL; cron triggers are handed to the platform's scheduler. */
export async function reconcileTrigger(
  deps: TriggerReconcileDeps,
  namespace: string,
  name: string,
): Promise<void> {
  const trigger = await deps.store.get('Trigger', namespace, name);
  if (!trigger) {
    await deps.scheduler.remove(namespace, name);
    return;
  }
  const fn = (await deps.store.get('Function', namespace, trigger.spec.function)) as
    | SlessFunction
    | undefined;
  let status: TriggerStatus = {};
  let ready = fn !== undefined;
  let reason: Reason = fn ? Reason.Scheduled : Reason.FunctionNotFound;
  let message = fn ? '' : `function "${trigger.spec.function}" not found`;
  if (trigger.spec.type === 'http') {
    await deps.scheduler.remove(namespace, name);
    status.url = `${deps.externalUrl}${functionPath(namespace, trigger.spec.function)}`;
    if (fn && trigger.spec.enabled === false) {
      // A Function answers at /fn/ whatever its Triggers say; a disabled http Trigger must not read
      // as if it turned the address off.
      reason = Reason.Disabled;
      message = `disabled; the function still serves at ${status.url}`;
    } else if (fn) {
      reason = Reason.Published;
      message = `serving at ${status.url}`;
    }
  } else {
    try {
      status = { ...status, ...(await deps.scheduler.apply(trigger, fn)) };
      if (fn)
        message = trigger.spec.enabled === false ? 'disabled' : `next run ${status.nextRun ?? 'unknown'}`;
      if (fn && trigger.spec.enabled === false) reason = Reason.Disabled;
    } catch (thrown) {
      ready = false;
      reason = Reason.ScheduleFailed;
      message = asError(thrown).message;
    }
  }
  status.phase = ready ? (trigger.spec.enabled === false ? 'Disabled' : 'Ready') : 'Failed';
  const update = new StatusUpdate<TriggerStatus>(trigger, {
    ...status,
    ...(trigger.status?.conditions ? { conditions: trigger.status.conditions } : {}),
  });
  await update.set('Ready', ready, reason, message).write(deps.store, trigger);
}
