// A commit that changes 200 of 1,000 functions, with builds that take BUILD_MS (default 5 s) and
// rollouts that take ROLLOUT_MS (default 2 s, a pod becoming available), through the real controller
// and function reconciler over the in-memory store (the builder and platform are timers: this measures
// how the controller spends its slots, not the builds). The kube platform's settings are used: 32
// build slots. The baseline is the build time times ⌈changed / build slots⌉, what the builds alone
// need; the ratio is how close the controller's time to all Ready comes to it. A controller whose
// reconciles wait for their build and rollout holds a slot through both, and needs more rounds.
// Also counts status writes per changed function.
// Run: npx tsx bench/commit-slots.ts   (FUNCTIONS, CHANGED, BUILD_MS, ROLLOUT_MS to change the shape)
import { existsSync } from 'node:fs';
import { pino } from 'pino';
import type { Builder, ObjectStore, WorkloadPlatform } from '../src/core/interfaces.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  type BuildRecord,
  type SlessFunction,
} from '../src/core/resources.js';
import { MemoryStore } from '../src/platform/local/memory-store.js';
import { Controller } from '../src/reconcile/controller.js';
import { report } from './report.ts';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const CHANGED = Number(process.env.CHANGED ?? 200);
const BUILD_MS = Number(process.env.BUILD_MS ?? 5000);
const ROLLOUT_MS = Number(process.env.ROLLOUT_MS ?? 2000);
const BUILD_SLOTS = 32;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
// The controller before background builds took one setting for both: 32 reconciles that waited.
const backgroundBuilds = existsSync(new URL('../src/reconcile/runtime/in-flight.ts', import.meta.url));

function fn(i: number, key: string): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name: `fn-${i}`,
      namespace: 'bench',
      labels: { 'sless.dev/source': 'repo' },
      annotations: {
        [ANNOTATION_BUILD_KEY]: key.repeat(64).slice(0, 64),
        [ANNOTATION_CONFIG_HASH]: 'f'.repeat(32),
        [ANNOTATION_COMMIT]: key.repeat(40).slice(0, 40),
      },
    },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  };
}

const built = new Set<string>();
let buildsRunning = 0;
let maxBuildsRunning = 0;
const record = (key: string): BuildRecord => ({
  buildKey: key,
  commit: 'c'.repeat(40),
  result: 'Succeeded',
  startedAt: 't0',
  finishedAt: 't1',
});
const builder: Builder = {
  lookup: async (f, key) => (built.has(`${f.metadata.name}@${key}`) ? record(key) : undefined),
  build: async (request) => {
    buildsRunning++;
    maxBuildsRunning = Math.max(maxBuildsRunning, buildsRunning);
    await pause(BUILD_MS);
    buildsRunning--;
    built.add(`${request.fn.metadata.name}@${request.buildKey}`);
    return record(request.buildKey);
  },
};
const revisions = new Map<string, string>();
const platform: WorkloadPlatform = {
  deploy: async (f, _build, { revision }) => {
    await pause(ROLLOUT_MS);
    revisions.set(f.metadata.name, revision);
  },
  remove: async () => undefined,
  currentRevision: (_ns, name) => revisions.get(name),
};

const store = new MemoryStore();
let statusWrites = 0;
const patch = store.patchStatus.bind(store);
store.patchStatus = ((object, status) => {
  statusWrites++;
  return patch(object, status);
}) as ObjectStore['patchStatus'];

const controller = new Controller({
  store,
  builder,
  platform,
  // The functions' source: its head never resolves (no sync applies anything), and a snapshot of it is
  // an empty tree, which is all the timer builder needs.
  readers: {
    create: async () => ({
      resolveHead: async () => {
        throw new Error('this benchmark applies its Functions itself');
      },
      snapshot: async (commit: string) => ({
        commit,
        listFiles: async () => [],
        readFile: async () => new Uint8Array(),
      }),
      isOnBranch: async () => true,
    }),
  },
  scheduler: { apply: async () => ({}), remove: async () => undefined },
  jobs: {
    run: async () => {
      throw new Error('no jobs in this benchmark');
    },
  },
  logger: pino({ level: 'silent' }),
  externalUrl: 'http://sless.bench',
  ...(backgroundBuilds ? { buildConcurrency: BUILD_SLOTS } : { functionConcurrency: BUILD_SLOTS }),
  quotas: { maxFunctions: 100_000, maxProcesses: 100_000, maxSources: 100 },
});
await controller.start();
await store.apply({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'GitSource',
  metadata: { name: 'repo', namespace: 'bench' },
  spec: { url: 'https://git.bench/repo.git', branch: 'main', path: '.', interval: '1h', suspend: false },
});

// The first commit: every function built and serving (builds instant), then the measured commit.
const firstBuild = BUILD_MS;
for (let i = 0; i < FUNCTIONS; i++) built.add(`fn-${i}@${'a'.repeat(64)}`);
for (let i = 0; i < FUNCTIONS; i++) await store.apply(fn(i, 'a'));
await controller.idle();
const readyCount = async (key: string) =>
  (await store.list('Function')).filter(
    (f) =>
      f.status?.phase === 'Ready' &&
      (f.status as { servingRevision?: string }).servingRevision?.startsWith(key.repeat(12)),
  ).length;
if ((await readyCount('a')) !== FUNCTIONS) throw new Error('the first commit did not serve everything');

statusWrites = 0;
const started = Date.now();
for (let i = 0; i < CHANGED; i++) await store.apply(fn(i, 'b'));
while ((await readyCount('b')) < CHANGED) await pause(50);
const seconds = (Date.now() - started) / 1000;
await controller.stop();

const ideal = (firstBuild / 1000) * Math.ceil(CHANGED / BUILD_SLOTS);
const writesPerFunction = statusWrites / CHANGED;
console.log(
  `${CHANGED} of ${FUNCTIONS} changed, builds ${BUILD_MS} ms, rollouts ${ROLLOUT_MS} ms, ${BUILD_SLOTS} build slots` +
    ` (${backgroundBuilds ? 'background builds and rollouts' : 'reconciles that wait'}):` +
    ` all Ready in ${seconds.toFixed(1)} s; builds alone need ${ideal.toFixed(1)} s;` +
    ` at most ${maxBuildsRunning} builds at once; ${writesPerFunction.toFixed(2)} status writes per changed function`,
);
report(
  {
    bench: 'commit-slots',
    measure: `time to all Ready, ${CHANGED} of ${FUNCTIONS} changed`,
    value: `${seconds.toFixed(1)} s`,
    baseline: `builds alone ${ideal.toFixed(1)} s`,
    ratio: Number((seconds / ideal).toFixed(2)),
    target: 'close to 1',
  },
  {
    bench: 'commit-slots',
    measure: 'status writes per changed function',
    value: writesPerFunction.toFixed(2),
  },
);
