/**
 * The controller's function queue in front of its fair gate, against MemoryStore with fake builder and
 * platform: one slot, and a build lookup that waits until the test lets it go, so the test decides
 * when each reconcile may finish and sees which one runs next.
 */
import { afterEach, expect, test } from 'vitest';
import {
  buildRecord,
  functionResource,
  recordingRunner,
  recordingScheduler,
  silentLogger,
} from '../../test/helpers/reconcile-fakes.js';
import type { ObjectStore } from '../core/interfaces.js';
import { ReconcileRequests } from '../core/reconcile-requests.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  type Trigger,
} from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { Controller } from './controller.js';

const annotations = (key: string) => ({
  [ANNOTATION_BUILD_KEY]: key.repeat(32),
  [ANNOTATION_CONFIG_HASH]: 'f'.repeat(32),
  [ANNOTATION_COMMIT]: 'c'.repeat(40),
});

async function eventually(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A controller with one reconcile slot whose build lookups wait for `release`. */
function startController(options: { requests?: ReconcileRequests; holdLookups?: boolean } = {}) {
  const { requests, holdLookups = true } = options;
  const store = new MemoryStore();
  let functionReads = 0;
  const get = store.get.bind(store);
  store.get = ((kind, namespace, name) => {
    if (kind === 'Function') functionReads++;
    return get(kind, namespace, name);
  }) as ObjectStore['get'];
  const scheduler = recordingScheduler();
  const lookups: string[] = [];
  const waiting: Array<() => void> = [];
  const controller = new Controller({
    store,
    builder: {
      lookup: async (fn, key) => {
        lookups.push(fn.metadata.name);
        if (holdLookups) await new Promise<void>((resolve) => waiting.push(resolve));
        return buildRecord(key);
      },
      build: async () => {
        throw new Error('every build exists already');
      },
    },
    platform: {
      deploy: async () => undefined,
      remove: async () => undefined,
      currentRevision: () => undefined,
    },
    readers: {
      create: async () => {
        throw new Error('no sources here');
      },
    },
    scheduler,
    jobs: recordingRunner(),
    logger: silentLogger,
    externalUrl: 'http://sless.test',
    functionConcurrency: 1,
    ...(requests ? { requests } : {}),
  });
  return {
    store,
    controller,
    scheduler,
    lookups,
    functionReads: () => functionReads,
    /** Lets the oldest waiting lookup finish. */
    release: () => waiting.shift()?.(),
  };
}

let running: Controller | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

test('functions waiting for a reconcile slot read nothing from the store', async () => {
  const t = startController();
  running = t.controller;
  await t.controller.start();
  for (let i = 0; i < 20; i++) await t.store.apply(functionResource(`fn-${i}`, annotations('a')));
  await eventually(() => t.lookups.length === 1, 'the first reconcile');
  t.release();
  await eventually(() => t.lookups.length === 2, 'the second reconcile');
  // Twenty keys were queued before the second reconcile began; each read the Function before it
  // waited for a slot, the reads would be past twenty here. Two reconciles read what two read.
  expect(t.lookups).toEqual(['fn-0', 'fn-1']);
  expect(t.functionReads()).toBeLessThan(10);
});

test('a change to a serving function goes ahead of a cold backlog, as the store last showed it', async () => {
  const t = startController();
  running = t.controller;
  await t.controller.start();
  await t.store.apply(functionResource('serving', annotations('a')));
  // Its passes (the rollout starts in one and is taken up in the next) each wait for a release.
  await eventually(async () => {
    t.release();
    return (await t.store.get('Function', 'ns', 'serving'))?.status?.servingRevision !== undefined;
  }, 'the serving function serving');
  t.lookups.length = 0;
  for (let i = 0; i < 5; i++) await t.store.apply(functionResource(`cold-${i}`, annotations('b')));
  await eventually(() => t.lookups.length === 1, 'the first cold reconcile');
  // A new commit of the serving function, queued behind four cold ones.
  await t.store.apply(functionResource('serving', annotations('d')));
  t.release();
  await eventually(() => t.lookups.length === 2, 'the next reconcile');
  expect(t.lookups).toEqual(['cold-0', 'serving']);
});

test("a Function's event finds its Triggers and FunctionJobs in the store's watch cache, without a list", async () => {
  const t = startController();
  running = t.controller;
  const cron: Trigger = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Trigger',
    metadata: { name: 'fn-0-cron', namespace: 'ns' },
    spec: { function: 'fn-0', type: 'cron', schedule: '* * * * *', enabled: true },
  };
  let lists = 0;
  const list = t.store.list.bind(t.store);
  t.store.list = ((kind, options) => {
    lists++;
    return list(kind, options);
  }) as ObjectStore['list'];
  await t.controller.start();
  lists = 0;
  // Only this Trigger is in the "cache"; the MemoryStore's lists know of none.
  Object.assign(t.store, {
    cached: (kind: string, keep: (o: Trigger) => boolean) => (kind === 'Trigger' ? [cron].filter(keep) : []),
  });
  await t.store.apply(functionResource('fn-0', annotations('a')));
  // The Trigger's reconcile, queued by the function's event, finds no Trigger and unschedules it.
  await eventually(() => t.scheduler.removed.includes('fn-0-cron'), 'the dependent Trigger reconciled');
  expect(lists).toBe(0);
});

test("a watcher's request reconciles the Function while the controller runs, and reaches no stopped one", async () => {
  const requests = new ReconcileRequests();
  const t = startController({ requests, holdLookups: false });
  running = t.controller;
  // Before start nothing listens: a request then is dropped (start lists every object anyway).
  requests.request('Function', 'ns', 'fn-0');
  expect(requests.listenerCount).toBe(0);
  await t.controller.start();
  await t.store.apply(functionResource('fn-0', annotations('a')));
  await eventually(
    async () => (await t.store.get('Function', 'ns', 'fn-0'))?.status?.servingRevision !== undefined,
    'fn-0 serving',
  );
  await t.controller.idle();
  // Each reconcile reads its Function once, first thing.
  const before = t.functionReads();
  // A process of fn-0 exited, say: the platform asks, and fn-0 reconciles again.
  requests.request('Function', 'ns', 'fn-0');
  await eventually(() => t.functionReads() > before, 'the requested reconcile');
  await t.controller.idle();
  await t.controller.stop();
  const readsWhenStopped = t.functionReads();
  running = undefined;
  expect(requests.listenerCount).toBe(0);
  // The next leader term's controller picks the stream up; the stopped one hears nothing more.
  const next = startController({ requests, holdLookups: false });
  running = next.controller;
  await next.controller.start();
  await next.store.apply(functionResource('fn-0', annotations('a')));
  await eventually(
    async () => (await next.store.get('Function', 'ns', 'fn-0'))?.status?.servingRevision !== undefined,
    'fn-0 serving under the next controller',
  );
  await next.controller.idle();
  const nextBefore = next.functionReads();
  requests.request('Function', 'ns', 'fn-0');
  await eventually(() => next.functionReads() > nextBefore, 'the request reaching the next controller');
  await next.controller.idle();
  expect(t.functionReads()).toBe(readsWhenStopped);
  expect(requests.listenerCount).toBe(1);
});

test('a request for a deleting GitSource runs its finalizer: what it applied is pruned, then the store lets it go, and each pruned Function too', async () => {
  const requests = new ReconcileRequests();
  const t = startController({ requests, holdLookups: false });
  running = t.controller;
  // The store hides a deleting source (as the kube store does), and records when an object is let go.
  const released: string[] = [];
  Object.assign(t.store, {
    releaseFinalizer: async (kind: string, namespace: string, name: string) => {
      if (kind !== 'GitSource') return void released.push(`${kind} ${namespace}/${name}`);
      const left = await t.store.list('Function', { namespace, labels: { 'sless.dev/source': name } });
      released.push(`${kind} ${namespace}/${name} with ${left.length} of its Functions left`);
    },
  });
  await t.controller.start();
  await t.store.apply(functionResource('fn-0', annotations('a')));
  await t.store.apply(functionResource('fn-1', annotations('b')));
  await t.controller.idle();
  expect(released).toEqual([]);
  requests.request('GitSource', 'ns', 'repo');
  await eventually(() => released.length >= 3, 'the finalizers released');
  await t.controller.idle();
  // The source went once its Functions had; each pruned Function's own finalizer (its workload and
  // builds removed) let it go too, and nothing else was released.
  expect(released.filter((r) => r.startsWith('GitSource'))).toEqual([
    'GitSource ns/repo with 0 of its Functions left',
  ]);
  expect(released.filter((r) => !r.startsWith('GitSource')).sort()).toEqual([
    'Function ns/fn-0',
    'Function ns/fn-1',
  ]);
  expect(await t.store.list('Function', { namespace: 'ns' })).toEqual([]);
});
