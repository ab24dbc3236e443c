/**
 * How the controller merges sync requests for one source (webhooks, polls, the sync endpoint), and
 * what a sync answers when its source cannot be opened, against MemoryStore with a reader that counts
 * the syncs that reached it.
 */
import { afterEach, expect, test } from 'vitest';
import { recordingRunner, recordingScheduler, silentLogger } from '../../test/helpers/reconcile-fakes.js';
import { SourceError } from '../core/errors.js';
import type { SourceReader } from '../core/interfaces.js';
import type { GitSource } from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { Controller } from './controller.js';
import type { SyncResult } from './source-sync.js';

const source: GitSource = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'GitSource',
  metadata: { name: 'repo', namespace: 'ns' },
  spec: { url: 'https://git.example/repo.git', branch: 'main', path: '.', interval: '1h', suspend: false },
};

/** Each sync asks the reader for the head once; this one answers BranchNotFound and counts. */
function countingReader(): { reader: SourceReader; syncs: () => number } {
  let syncs = 0;
  return {
    syncs: () => syncs,
    reader: {
      resolveHead: async () => {
        syncs++;
        throw new SourceError('branch main not found', 'BranchNotFound');
      },
      snapshot: async () => {
        throw new Error('not reached');
      },
      isOnBranch: async () => false,
    },
  };
}

function controllerWith(options: { syncCoalesceMs: number; create: () => Promise<SourceReader> }) {
  const store = new MemoryStore();
  const controller = new Controller({
    store,
    builder: {
      lookup: async () => undefined,
      build: async () => {
        throw new Error('no builds here');
      },
    },
    platform: {
      deploy: async () => undefined,
      remove: async () => undefined,
      currentRevision: () => undefined,
    },
    readers: { create: options.create },
    scheduler: recordingScheduler(),
    jobs: recordingRunner(),
    logger: silentLogger,
    externalUrl: 'http://sless.test',
    syncCoalesceMs: options.syncCoalesceMs,
  });
  return { store, controller };
}

let running: Controller | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

test('the first request syncs at once; those within the window join one sync, which a forced request starts', async () => {
  const counted = countingReader();
  const { store, controller } = controllerWith({
    syncCoalesceMs: 60_000,
    create: async () => counted.reader,
  });
  running = controller;
  await store.apply(source);
  await controller.syncNow('ns', 'repo');
  expect(counted.syncs()).toBe(1);

  // Fifty deliveries right after it: they wait for the window, as one sync.
  const joined = Array.from({ length: 50 }, () => controller.syncNow('ns', 'repo'));
  expect(new Set(joined).size).toBe(1);
  // The sync endpoint does not wait out a window: it starts the waiting sync, which it joins.
  const forced = await controller.syncNow('ns', 'repo', { force: true });
  const results = await Promise.all(joined);
  expect(results.every((r) => r === forced)).toBe(true);
  expect(forced?.outcome).toBe('failed');
  // One sync for the fifty and the forced request together, and nothing else.
  expect(counted.syncs()).toBe(2);
});

test('a storm spread over a second costs about one sync per window, not one per delivery', async () => {
  const counted = countingReader();
  const { store, controller } = controllerWith({ syncCoalesceMs: 200, create: async () => counted.reader });
  running = controller;
  await store.apply(source);
  const answers: Array<Promise<SyncResult | undefined>> = [];
  const started = Date.now();
  for (let i = 0; i < 100; i++) {
    answers.push(controller.syncNow('ns', 'repo'));
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const spreadMs = Date.now() - started;
  await Promise.all(answers);
  // A window starts at each sync; the last delivery's sync runs once the window it fell in is over.
  expect(counted.syncs()).toBeGreaterThanOrEqual(2);
  expect(counted.syncs()).toBeLessThanOrEqual(Math.ceil(spreadMs / 200) + 1);
});

test('a sync whose source cannot be opened answers the failure and the reason its status carries', async () => {
  const { store, controller } = controllerWith({
    syncCoalesceMs: 0,
    create: async () => {
      throw new SourceError('secretRef "creds": no such secret in ns', 'SecretNotFound');
    },
  });
  running = controller;
  await store.apply(source);
  const result = await controller.syncNow('ns', 'repo', { force: true });
  expect(result).toEqual({
    outcome: 'failed',
    reason: 'SecretNotFound',
    message: 'secretRef "creds": no such secret in ns',
  });
  const ready = (await store.get('GitSource', 'ns', 'repo'))?.status?.conditions?.find(
    (c) => c.type === 'Ready',
  );
  expect(ready).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
});
