import { setCondition } from '../core/conditions.js';
import { asError } from '../core/errors.js';
import type { ObjectStore, TriggerScheduler } from '../core/interfaces.js';
import { functionPath } from '../core/naming.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../core/resources.js';

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
  const trigger = (await deps.store.get('Trigger', namespace, name)) as Trigger | undefined;
  if (!trigger) {
    await deps.scheduler.remove(namespace, name);
    return;
  }
  const generation = trigger.metadata.generation ?? 1;
  const fn = (await deps.store.get('Function', namespace, trigger.spec.function)) as
    | SlessFunction
    | undefined;
  let status: TriggerStatus = { observedGeneration: generation };
  let ready = fn !== undefined;
  let reason = fn ? 'Scheduled' : 'FunctionNotFound';
  let message = fn ? '' : `function "${trigger.spec.function}" not found`;
  if (trigger.spec.type === 'http') {
    await deps.scheduler.remove(namespace, name);
    status.url = `${deps.externalUrl}${functionPath(namespace, trigger.spec.function)}`;
    if (fn) {
      reason = 'Published';
      message = `serving at ${status.url}`;
    }
  } else {
    try {
      status = { ...status, ...(await deps.scheduler.apply(trigger, fn)) };
      if (fn)
        message = trigger.spec.enabled === false ? 'disabled' : `next run ${status.nextRun ?? 'unknown'}`;
      if (fn && trigger.spec.enabled === false) reason = 'Disabled';
    } catch (thrown) {
      ready = false;
      reason = 'ScheduleFailed';
      message = asError(thrown).message;
    }
  }
  status.phase = ready ? (trigger.spec.enabled === false ? 'Disabled' : 'Ready') : 'Failed';
  status.conditions = setCondition(trigger.status?.conditions, {
    type: 'Ready',
    status: ready ? 'True' : 'False',
    reason,
    message,
    observedGeneration: generation,
  });
  await deps.store.patchStatus(trigger, status);
}
