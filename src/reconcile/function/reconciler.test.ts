/**
 * The function reconciler, table-driven, against MemoryStore with a fake builder and platform (what
 * they do is under the test's control; the reconciler is what is under test). Each row gives the
 * world before one reconcile and the conditions it must leave behind.
 */
import { describe, expect, it } from 'vitest';
import {
  buildRecord,
  functionResource,
  reconcileUntilQuiet,
  silentLogger,
} from '../../../test/helpers/reconcile-fakes.js';
import { BuildFailedError, RecordedFailure, RolloutError } from '../../core/errors.js';
import type { Builder, ObjectStore, SourceSnapshot, WorkloadPlatform } from '../../core/interfaces.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  type BuildRecord,
  type FunctionStatus,
  type SlessFunction,
  type Trigger,
} from '../../core/resources.js';
import type { StatusUpdate } from '../../core/status.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { InFlight } from '../runtime/in-flight.js';
import { objectRef } from '../runtime/object-ref.js';
import { reconcileAndPatch } from '../runtime/patch.js';
import {
  type FunctionReconcileDeps,
  isFunctionEnabled,
  reconcileFunction,
  revisionOf,
  SECRET_RECHECK_MS,
} from './reconciler.js';

const KEY = 'b'.repeat(32);
const CONFIG = 'f'.repeat(32);
const COMMIT = 'c'.repeat(40);
const REVISION = revisionOf(KEY, CONFIG, true);
const OLD = 'a'.repeat(12);

const built = buildRecord(KEY, COMMIT);

interface Row {
  name: string;
  /** The Function carries the annotations a GitSource gives it (default true). */
  annotated?: boolean;
  /** A build of the key exists already. */
  builtBefore?: boolean;
  /** What building does: succeed, fail for good (the code), or fail for a moment (storage). */
  build?: 'ok' | 'fails' | 'transient';
  /** The revision the platform runs before the reconcile, recorded as serving (and Ready) in status too. */
  running?: string;
  /** The last reconcile's rollout of the desired revision failed (Ready=False, RolloutFailed). */
  rolloutFailedBefore?: boolean;
  /** The last commit's build failed (Ready=False and Stalled, BuildFailed). */
  buildFailedBefore?: boolean;
  /** What deploying does. */
  deploy?: 'ok' | 'rollout-fails' | 'transient';
  /** A Trigger with enabled: false points at the function. */
  disabled?: boolean;
  expect: {
    phase: string;
    ready: ['True' | 'False', string];
    reconciling: 'True' | 'False';
    /** The Stalled condition's reason when it must be there; absent otherwise. */
    stalled?: string;
    message?: string;
    /** What the reconcile throws: nothing, a retry after a failure it recorded, or the error itself. */
    throws?: 'recorded' | 'transient';
    builds: number;
    deploys: string[];
  };
}

const rows: Row[] = [
  {
    name: 'not applied by a GitSource',
    annotated: false,
    expect: {
      phase: 'Failed',
      ready: ['False', 'MissingAnnotations'],
      reconciling: 'False',
      builds: 0,
      deploys: [],
    },
  },
  {
    name: 'new code: built, rolled out, serving',
    expect: {
      phase: 'Ready',
      ready: ['True', 'Serving'],
      reconciling: 'False',
      message: `serving ${REVISION} (built at ${COMMIT.slice(0, 12)})`,
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'a commit that builds, after one whose build failed: Ready, and no longer Stalled',
    running: OLD,
    buildFailedBefore: true,
    expect: {
      phase: 'Ready',
      ready: ['True', 'Serving'],
      reconciling: 'False',
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'built before and rolled out already: nothing to do but say so',
    builtBefore: true,
    running: REVISION,
    expect: { phase: 'Ready', ready: ['True', 'Serving'], reconciling: 'False', builds: 0, deploys: [] },
  },
  {
    name: 'the build fails with nothing serving',
    build: 'fails',
    expect: {
      phase: 'Failed',
      ready: ['False', 'BuildFailed'],
      reconciling: 'False',
      stalled: 'BuildFailed',
      message: `build ${KEY.slice(0, 12)} failed: npm ci exited 1`,
      builds: 1,
      deploys: [],
    },
  },
  {
    name: 'the build fails while an older revision serves: it serves on, but the push did not land',
    build: 'fails',
    running: OLD,
    expect: {
      // Not Ready, as for a failed rollout: the revision this commit asks for will not serve.
      phase: 'Failed',
      ready: ['False', 'BuildFailed'],
      reconciling: 'False',
      stalled: 'BuildFailed',
      message: `build ${KEY.slice(0, 12)} failed: npm ci exited 1; still serving ${OLD}`,
      builds: 1,
      deploys: [],
    },
  },
  {
    name: 'storage fails during the build: Building stays, the queue retries',
    build: 'transient',
    expect: {
      phase: 'Building',
      // The runtime's one patch says the retry: not Ready, Reconciling with ProgressingWithRetry.
      ready: ['False', 'ReconcileFailed'],
      reconciling: 'True',
      throws: 'transient',
      builds: 1,
      deploys: [],
    },
  },
  {
    name: 'the new revision never becomes available; the old one serves',
    running: OLD,
    deploy: 'rollout-fails',
    expect: {
      // Not Ready: the revision the Function asks for does not serve; the old one still does.
      phase: 'Failed',
      ready: ['False', 'RolloutFailed'],
      reconciling: 'False',
      message: `pod p: CrashLoopBackOff; still serving ${OLD}`,
      throws: 'recorded',
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'the retry of a failed rollout does not make it Ready while it deploys again',
    running: OLD,
    rolloutFailedBefore: true,
    deploy: 'transient',
    expect: {
      phase: 'Deploying',
      // The runtime's one patch says the retry: not Ready, Reconciling with ProgressingWithRetry.
      ready: ['False', 'ReconcileFailed'],
      reconciling: 'True',
      throws: 'transient',
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'a failed rollout, then one that serves: Ready again',
    running: OLD,
    rolloutFailedBefore: true,
    expect: {
      phase: 'Ready',
      ready: ['True', 'Serving'],
      reconciling: 'False',
      message: `serving ${REVISION} (built at ${COMMIT.slice(0, 12)})`,
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'the first revision never becomes available',
    deploy: 'rollout-fails',
    expect: {
      phase: 'Failed',
      ready: ['False', 'RolloutFailed'],
      reconciling: 'False',
      message: 'pod p: CrashLoopBackOff',
      throws: 'recorded',
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'the platform fails for a moment while deploying: Deploying stays, the queue retries',
    running: OLD,
    deploy: 'transient',
    expect: {
      phase: 'Deploying',
      // The runtime's one patch says the retry: not Ready, Reconciling with ProgressingWithRetry.
      ready: ['False', 'ReconcileFailed'],
      reconciling: 'True',
      throws: 'transient',
      builds: 1,
      deploys: [REVISION],
    },
  },
  {
    name: 'a trigger disabled it: built, deployed switched off',
    disabled: true,
    expect: {
      phase: 'Disabled',
      ready: ['False', 'Disabled'],
      reconciling: 'False',
      builds: 1,
      deploys: [revisionOf(KEY, CONFIG, false)],
    },
  },
];

async function run(row: Row) {
  const store = new MemoryStore();
  const annotations: Record<string, string> =
    row.annotated === false
      ? {}
      : { [ANNOTATION_BUILD_KEY]: KEY, [ANNOTATION_CONFIG_HASH]: CONFIG, [ANNOTATION_COMMIT]: COMMIT };
  const fn = await store.apply(functionResource('f', annotations));
  if (row.running) {
    const failed = row.rolloutFailedBefore;
    await store.patchStatus(fn, {
      servingRevision: row.running,
      conditions: [
        {
          type: 'Ready',
          status: failed ? 'False' : 'True',
          reason: failed ? 'RolloutFailed' : 'Serving',
          message: failed
            ? `pod p: CrashLoopBackOff; still serving ${row.running}`
            : `serving ${row.running}`,
          lastTransitionTime: new Date(0).toISOString(),
          observedGeneration: 1,
        },
        ...(row.buildFailedBefore
          ? [
              {
                type: 'Stalled',
                status: 'True' as const,
                reason: 'BuildFailed',
                message: 'build 0123456789ab failed: npm ci exited 1',
                lastTransitionTime: new Date(0).toISOString(),
                observedGeneration: 1,
              },
            ]
          : []),
      ],
    });
  }
  if (row.disabled)
    await store.apply({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 't', namespace: 'ns' },
      spec: { type: 'http', function: 'f', enabled: false },
    });

  let builds = 0;
  // A finished build is durable state: a later lookup finds it, as the real builders' do.
  let made = false;
  const builder: Builder = {
    lookup: async (_fn, key) => ((row.builtBefore || made) && key === KEY ? built : undefined),
    build: async () => {
      builds++;
      if (row.build === 'fails')
        throw new BuildFailedError({ ...built, result: 'Failed', message: 'npm ci exited 1' });
      if (row.build === 'transient') throw new Error('S3 unreachable');
      made = true;
      return built;
    },
  };
  let current = row.running;
  const deploys: string[] = [];
  const platform: WorkloadPlatform = {
    deploy: async (_fn, _build, { revision }) => {
      deploys.push(revision);
      if (row.deploy === 'rollout-fails') throw new RolloutError('pod p: CrashLoopBackOff');
      if (row.deploy === 'transient') throw new Error('apiserver 500');
      current = revision;
    },
    remove: async () => undefined,
    currentRevision: () => current,
  };
  // Passes as the controller runs them, until one starts nothing more: at most three (build,
  // rollout, serving), each written once.
  const outcome = await reconcileUntilQuiet(
    {
      store,
      builder,
      platform,
      logger: silentLogger,
      externalUrl: 'http://sless.test',
      snapshotFor: async () => ({ snapshot: {} as SourceSnapshot, manifestFiles: new Set<string>() }),
      failedBuilds: new Map(),
    },
    'ns',
    'f',
  ).then(
    ({ passes }) => {
      expect(passes).toBeLessThanOrEqual(3);
      return undefined;
    },
    (error: unknown) => error,
  );
  return { status: (await store.get('Function', 'ns', 'f'))?.status, outcome, builds, deploys };
}

describe('reconcileFunction', () => {
  it.each(rows)('$name', async (row) => {
    const { status, outcome, builds, deploys } = await run(row);
    const condition = (type: string) => status?.conditions?.find((c) => c.type === type);
    expect(status?.phase).toBe(row.expect.phase);
    expect([condition('Ready')?.status, condition('Ready')?.reason]).toEqual(row.expect.ready);
    expect(condition('Reconciling')?.status).toBe(row.expect.reconciling);
    expect(condition('Stalled')?.reason).toBe(row.expect.stalled);
    if (row.expect.message !== undefined) expect(condition('Ready')?.message).toBe(row.expect.message);
    // Every condition says which generation it describes (kstatus).
    for (const c of status?.conditions ?? []) expect(c.observedGeneration).toBe(1);
    if (row.expect.throws === 'recorded') expect(outcome).toBeInstanceOf(RecordedFailure);
    else if (row.expect.throws === 'transient') {
      expect(outcome).toBeInstanceOf(Error);
      expect(outcome).not.toBeInstanceOf(RecordedFailure);
    } else expect(outcome).toBeUndefined();
    expect(builds).toBe(row.expect.builds);
    expect(deploys).toEqual(row.expect.deploys);
    // nodejs20 is past its end of life: said in status whatever else happened, and only there.
    expect(status?.warnings).toEqual([
      expect.stringMatching(/^runtime nodejs20 is past its end of life \(2026-04-30\)/),
    ]);
  });
});

describe('isFunctionEnabled', () => {
  const trigger = (fn: string, enabled: boolean): Trigger => ({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Trigger',
    metadata: { name: `${fn}-cron`, namespace: 'ns' },
    spec: { function: fn, type: 'cron', schedule: '* * * * *', enabled },
  });

  it("reads a store's watch cache, without a list, where the store keeps one", async () => {
    const cachedTriggers = [trigger('f', false), trigger('g', true)];
    const store = {
      cached: (kind: string, keep: (t: Trigger) => boolean) =>
        kind === 'Trigger' ? cachedTriggers.filter(keep) : undefined,
      list: async () => {
        throw new Error('listed although the store keeps a cache');
      },
    } as unknown as ObjectStore;
    expect(await isFunctionEnabled(store, functionResource('f'))).toBe(false);
    expect(await isFunctionEnabled(store, functionResource('g'))).toBe(true);
    expect(await isFunctionEnabled(store, functionResource('h'))).toBe(true);
  });
});

describe('a referenced secret that is not there', () => {
  it('is waited for: Failed, not Ready naming what serves, Reconciling, one event, rechecked after SECRET_RECHECK_MS', async () => {
    const store = new MemoryStore();
    const fn = functionResource('f', {
      [ANNOTATION_BUILD_KEY]: KEY,
      [ANNOTATION_CONFIG_HASH]: CONFIG,
      [ANNOTATION_COMMIT]: COMMIT,
    });
    fn.spec.env = { TOKEN: { secretRef: { name: 'payments', key: 'token' } } };
    await store.apply(fn);
    const events: string[] = [];
    const deploys: string[] = [];
    const deps: FunctionReconcileDeps = {
      store,
      builder: { lookup: async (_fn, key) => buildRecord(key, COMMIT), build: async () => buildRecord(KEY) },
      platform: {
        deploy: async (_fn, _build, { revision }) => {
          deploys.push(revision);
        },
        remove: async () => undefined,
        currentRevision: () => OLD,
      },
      logger: silentLogger,
      externalUrl: 'http://sless.test',
      snapshotFor: async () => ({ snapshot: {} as SourceSnapshot, manifestFiles: new Set<string>() }),
      failedBuilds: new Map(),
      events: { record: (_object, type, reason, message) => events.push(`${type} ${reason} ${message}`) },
      builds: new InFlight<BuildRecord>(() => undefined),
      rollouts: new InFlight<void>(() => undefined),
      secrets: { get: async () => undefined },
    };
    const pass = () =>
      reconcileAndPatch({
        store,
        logger: silentLogger,
        ref: objectRef('Function', 'ns', 'f'),
        retryDelayMs: () => 1000,
        reconcile: (object: SlessFunction, update: StatusUpdate<FunctionStatus>) =>
          reconcileFunction(deps, object, update),
        finalize: async () => undefined,
      });
    const missing = 'secret "payments" not found in namespace ns';
    expect(await pass()).toEqual({ requeueAfterMs: SECRET_RECHECK_MS });
    expect(await pass()).toEqual({ requeueAfterMs: SECRET_RECHECK_MS });
    const status = (await store.get('Function', 'ns', 'f'))?.status;
    expect([status?.phase, status?.lastError]).toEqual(['Failed', missing]);
    expect((status?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message])).toEqual([
      ['Ready', 'False', 'SecretNotFound', `${missing}; still serving ${OLD}`],
      ['Reconciling', 'True', 'SecretNotFound', `${missing}; still serving ${OLD}`],
    ]);
    // Said once, not on every recheck; nothing rolled.
    expect(events).toEqual([`Warning SecretNotFound ${missing}`]);
    expect(deploys).toEqual([]);
  });
});
