/**
 * The trigger reconciler, table-driven, against MemoryStore with a fake scheduler. Each row gives
 * the world before one reconcile and the Ready condition it must leave behind.
 */
import { describe, expect, it } from 'vitest';
import { functionResource, recordingScheduler, silentLogger } from '../../../test/helpers/reconcile-fakes.js';
import type { Trigger, TriggerStatus } from '../../core/resources.js';
import { Reason, type StatusUpdate } from '../../core/status.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { objectRef } from '../runtime/object-ref.js';
import { reconcileAndPatch } from '../runtime/patch.js';
import { finalizeTrigger, reconcileTrigger, type TriggerReconcileDeps } from './reconciler.js';

/** One pass of the reconcile runtime over Trigger ns/{name}, as the controller runs it. */
function reconcileOnce(deps: TriggerReconcileDeps, name: string) {
  return reconcileAndPatch({
    store: deps.store,
    logger: silentLogger,
    ref: objectRef('Trigger', 'ns', name),
    retryDelayMs: () => 1000,
    reconcile: (trigger: Trigger, update: StatusUpdate<TriggerStatus>) =>
      reconcileTrigger(deps, trigger, update),
    finalize: () => finalizeTrigger(deps, 'ns', name),
  });
}

interface Row {
  name: string;
  type: 'http' | 'cron';
  enabled?: boolean;
  /** The function the trigger names exists (default true). */
  fnExists?: boolean;
  /** What the scheduler's apply returns, or throws. */
  schedule?: TriggerStatus | Error;
  expect: {
    phase: string;
    ready: ['True' | 'False', string];
    message: string;
    url?: string;
    applied: string[];
    removed: string[];
  };
}

const URL = 'http://sless.test/fn/ns/f';

const rows: Row[] = [
  {
    name: 'http: the function exists, its URL is published',
    type: 'http',
    expect: {
      phase: 'Ready',
      ready: ['True', Reason.Published],
      message: `serving at ${URL}`,
      url: URL,
      applied: [],
      removed: ['t'],
    },
  },
  {
    name: 'http: the function is missing',
    type: 'http',
    fnExists: false,
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.FunctionNotFound],
      message: 'function "f" not found',
      url: URL,
      applied: [],
      removed: ['t'],
    },
  },
  {
    name: 'http, disabled: Disabled like a cron Trigger, saying the function still serves',
    type: 'http',
    enabled: false,
    expect: {
      phase: 'Disabled',
      ready: ['True', Reason.Disabled],
      message: `disabled: the function is scaled to zero and ${URL} answers 503 until it is enabled`,
      url: URL,
      applied: [],
      removed: ['t'],
    },
  },
  {
    name: 'cron: scheduled, with its next run',
    type: 'cron',
    schedule: { nextRun: '2030-01-01T00:00:00Z' },
    expect: {
      phase: 'Ready',
      ready: ['True', Reason.Scheduled],
      message: 'next run 2030-01-01T00:00:00Z',
      applied: ['t'],
      removed: [],
    },
  },
  {
    name: 'cron, disabled: handed to the scheduler, which pauses it',
    type: 'cron',
    enabled: false,
    expect: {
      phase: 'Disabled',
      ready: ['True', Reason.Disabled],
      message: 'disabled',
      applied: ['t'],
      removed: [],
    },
  },
  {
    name: 'cron: the function is missing (the scheduler pauses it)',
    type: 'cron',
    fnExists: false,
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.FunctionNotFound],
      message: 'function "f" not found',
      applied: ['t'],
      removed: [],
    },
  },
  {
    name: 'cron: the scheduler refuses it',
    type: 'cron',
    schedule: new Error('invalid cron expression'),
    expect: {
      phase: 'Failed',
      ready: ['False', Reason.ScheduleFailed],
      message: 'invalid cron expression',
      applied: ['t'],
      removed: [],
    },
  },
];

describe('reconcileTrigger', () => {
  it.each(rows)('$name', async (row) => {
    const store = new MemoryStore();
    if (row.fnExists !== false) await store.apply(functionResource('f'));
    await store.apply({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 't', namespace: 'ns' },
      spec: {
        type: row.type,
        function: 'f',
        ...(row.type === 'cron' ? { schedule: '0 * * * *' } : {}),
        ...(row.enabled === false ? { enabled: false } : {}),
      } as Trigger['spec'],
    });
    const scheduler = recordingScheduler(row.schedule);
    await reconcileOnce({ store, scheduler, externalUrl: 'http://sless.test' }, 't');
    const status = (await store.get('Trigger', 'ns', 't'))?.status;
    const ready = status?.conditions?.find((c) => c.type === 'Ready');
    expect(status?.phase).toBe(row.expect.phase);
    expect([ready?.status, ready?.reason]).toEqual(row.expect.ready);
    expect(ready?.message).toBe(row.expect.message);
    expect(status?.url).toBe(row.expect.url);
    for (const c of status?.conditions ?? []) expect(c.observedGeneration).toBe(1);
    expect(status?.observedGeneration).toBe(1);
    expect(scheduler.applied).toEqual(row.expect.applied);
    expect(scheduler.removed).toEqual(row.expect.removed);
  });

  it('an amqp Trigger says where its failed messages end: the dead-letter exchange, or dropped', async () => {
    const store = new MemoryStore();
    await store.apply(functionResource('f'));
    const amqpTrigger = (name: string, spec: Partial<Trigger['spec']>) =>
      store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Trigger',
        metadata: { name, namespace: 'ns' },
        spec: { type: 'amqp', function: 'f', queue: 'q', secretRef: { name: 'r' }, ...spec },
      } as Trigger);
    await amqpTrigger('kept', { deadLetterExchange: 'dead', maxAttempts: 2 });
    await amqpTrigger('dropped', {});
    const scheduler = recordingScheduler({ consumer: 'consuming' });
    const deps = { store, scheduler, externalUrl: 'http://sless.test' };
    const deadLetters = async (name: string) => {
      await reconcileOnce(deps, name);
      const status = (await store.get('Trigger', 'ns', name))?.status;
      return {
        ready: status?.conditions?.find((c) => c.type === 'Ready')?.status,
        deadLetters: status?.conditions?.find((c) => c.type === 'DeadLetters'),
      };
    };
    const kept = await deadLetters('kept');
    expect(kept.ready).toBe('True');
    expect(kept.deadLetters).toMatchObject({ status: 'True', reason: Reason.DeadLetterExchange });
    expect(kept.deadLetters?.message).toBe(
      'a message failing 2 attempts (or answered 4xx) is published to exchange dead',
    );
    // A warning, not a failure: the trigger consumes, and the condition says what happens to failures.
    const dropped = await deadLetters('dropped');
    expect(dropped.ready).toBe('True');
    expect(dropped.deadLetters).toMatchObject({ status: 'False', reason: Reason.NoDeadLetterExchange });
    expect(dropped.deadLetters?.message).toMatch(
      /^no deadLetterExchange: a message failing 3 attempts \(or answered 4xx\) is rejected without requeue, and RabbitMQ drops it unless queue q has its own dead-letter exchange/,
    );
  });

  it('a Trigger that is no longer amqp loses the DeadLetters condition', async () => {
    const store = new MemoryStore();
    await store.apply(functionResource('f'));
    const apply = (spec: Partial<Trigger['spec']>) =>
      store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Trigger',
        metadata: { name: 't', namespace: 'ns' },
        spec: { function: 'f', ...spec },
      } as Trigger);
    const deps = { store, scheduler: recordingScheduler(), externalUrl: 'http://sless.test' };
    await apply({ type: 'amqp', queue: 'q', secretRef: { name: 'r' } });
    await reconcileOnce(deps, 't');
    const types = async () => (await store.get('Trigger', 'ns', 't'))?.status?.conditions?.map((c) => c.type);
    expect(await types()).toContain('DeadLetters');
    await apply({ type: 'cron', schedule: '0 * * * *' });
    await reconcileOnce(deps, 't');
    expect(await types()).toEqual(['Ready']);
  });

  it('a deleted trigger is removed from the scheduler and nothing is written', async () => {
    const store = new MemoryStore();
    const scheduler = recordingScheduler();
    await reconcileOnce({ store, scheduler, externalUrl: 'http://sless.test' }, 'gone');
    expect(scheduler.removed).toEqual(['gone']);
    expect(await store.list('Trigger', { namespace: 'ns' })).toEqual([]);
  });
});
