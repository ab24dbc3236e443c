/**
 * The control loop shared by both platforms: it keeps one reader per GitSource, polls at the source's
 * interval (and on ref changes for local repositories), syncs, and reconciles Functions from a keyed
 * work queue. Platforms plug in through ObjectStore, Builder, WorkloadPlatform and SourceReaderFactory.
 */

import type { Logger } from 'pino';
import { BoundedCache } from '../core/bounded-cache.js';
import { parseDuration } from '../core/duration.js';
import { asError, RecordedFailure, SlessError, SourceError } from '../core/errors.js';
import { FairGate, GateStoppedError } from '../core/fair-gate.js';
import type {
  Builder,
  EventRecorder,
  JobRunner,
  ObjectStore,
  SourceReader,
  SourceReaderFactory,
  SourceSnapshot,
  StoreEvent,
  TriggerScheduler,
  WorkloadPlatform,
} from '../core/interfaces.js';
import { DEFAULT_QUOTAS, type Quotas } from '../core/quotas.js';
import {
  ANNOTATION_COMMIT,
  type BaseStatus,
  type BuildRecord,
  type FunctionJob,
  type FunctionStatus,
  type GitSource,
  type GitSourceStatus,
  LABEL_SOURCE,
  type SlessFunction,
  type Trigger,
} from '../core/resources.js';
import { type KindName, REPO_KINDS } from '../core/schemas.js';
import { Reason, StatusUpdate } from '../core/status.js';
import { type BackoffOptions, WorkQueue } from '../core/work-queue.js';
import { loadManifests, ParsedManifestCache } from '../manifest/load.js';
import type { SecretReader } from '../secrets/references.js';
import type { RepoSecrets } from '../secrets/repo-secrets.js';
import { finalizeFunction, reconcileFunction } from './function/reconciler.js';
import { reconcileJob } from './job-reconcile.js';
import { setPin } from './pin.js';
import { BuildKeyCache } from './plan.js';
import { ProcessQuota } from './process-quota.js';
import { InFlight } from './runtime/in-flight.js';
import { refFromKey } from './runtime/object-ref.js';
import { reconcileAndPatch } from './runtime/patch.js';
import { type SyncResult, syncSource } from './source-sync.js';
import { reconcileTrigger } from './trigger-reconcile.js';

/** How long a stop waits for a git fetch in flight to finish writing into its cache. */
const STOP_WAIT_MS = 10_000;

export interface ControllerOptions {
  store: ObjectStore;
  builder: Builder;
  platform: WorkloadPlatform;
  readers: SourceReaderFactory;
  scheduler: TriggerScheduler;
  jobs: JobRunner;
  logger: Logger;
  externalUrl: string;
  /** Hooks for metrics; the controller itself knows nothing about Prometheus. */
  observer?: ControllerObserver;
  /**
   * Function reconciles run at once (default 4). A reconcile never waits on a build or a rollout
   * (both run in the background and queue the function again when they end), so this is set for
   * the controller's own work, not for waiting.
   */
  functionConcurrency?: number;
  /**
   * Builds run at once, shared fairly between namespaces (default 4: local builds run on this
   * machine). The kube platform raises it: its builds are Jobs that run on the cluster.
   */
  buildConcurrency?: number;
  /** Per-namespace limits; DEFAULT_QUOTAS when omitted. */
  quotas?: Quotas;
  /**
   * Every Function, Trigger and FunctionJob is reconciled again at this period (default 10 min),
   * event or not: what drifted without an event (a workload deleted behind our back, a missed watch
   * event) is put back. Sources have their own period, their poll interval.
   */
  resyncMs?: number;
  /** Retry delays of failed reconciles (defaults: 250 ms doubling to 5 min, ±20%, 10/s). */
  backoff?: BackoffOptions;
  /**
   * Unforced sync requests (webhooks, polls, repository watches) that come within this long of the
   * start of a source's last sync wait and join one sync at the end of it (default SYNC_COALESCE_MS).
   * The first request of a quiet source syncs at once; forced ones (the sync endpoint) never wait.
   */
  syncCoalesceMs?: number;
  /** Where syncs, builds, rollouts and prunes are told (Kubernetes Events on the kube platform). */
  events?: EventRecorder;
  /** Secrets functions reference (checked and hashed before a rollout); none exist when omitted. */
  secrets?: SecretReader;
  /** Decrypts SOPS Secret files of a repository and keeps them where functions find them. */
  repoSecrets?: RepoSecrets;
}

export interface ControllerObserver {
  syncFinished?(source: GitSource, result: SyncResult, durationMs: number): void;
  buildStarted?(fn: SlessFunction): void;
  /** A Function reconcile finished without error (its object may be gone: a deletion). */
  functionReconciled?(namespace: string, name: string): void;
}

/** Per source: the sync waiting to run after the one running now, which later requests join. */
interface SyncSlot {
  pending?: Promise<SyncResult | undefined>;
  force: boolean;
  /** When the last sync of this source started (ms since the epoch); 0 before the first. */
  lastStartedAt: number;
  /** Ends the coalescing wait of the pending sync at once (a forced request, or stop()). */
  wake?: () => void;
}

/** Webhooks and watch events within this long of a sync's start join the next sync (default). */
export const SYNC_COALESCE_MS = 1000;

interface SourceHandle {
  reader: SourceReader;
  identity: string;
  timer?: NodeJS.Timeout;
  unwatch?: () => void;
  debounce?: NodeJS.Timeout;
}

export class Controller {
  private readonly options: ControllerOptions;
  private readonly sources = new Map<string, SourceHandle>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Per source and commit; a promise, so reconciles that start together load the manifests once. */
  /**
   * Each synced commit's manifest files, per source, for the reconciles it starts. Bounded: a source
   * that syncs for months must not keep every commit it ever saw (a miss reads them again).
   */
  private readonly manifestFiles = new BoundedCache<string, Promise<ReadonlySet<string>>>(64);
  private readonly parsedManifests = new ParsedManifestCache();
  private readonly buildKeys = new BuildKeyCache();
  private readonly failedBuilds = new Map<string, BuildRecord>();
  private readonly functionQueue: WorkQueue;
  /** Fair shares between namespaces and sources for function reconciles (and so for builds). */
  private readonly functionGate: FairGate;
  /** Fair shares between namespaces and sources for builds. */
  private readonly buildGate: FairGate;
  private readonly builds: InFlight<BuildRecord>;
  private readonly rollouts: InFlight<void>;
  /** What the fair gate needs of each Function, as the store's events last showed it. */
  private readonly functionTasks = new Map<string, { flow: string; warm: boolean }>();
  private readonly processes: ProcessQuota;
  private readonly triggerQueue: WorkQueue;
  private readonly jobQueue: WorkQueue;
  private readonly sourceQueue: WorkQueue;
  private readonly syncSlots = new Map<string, SyncSlot>();
  private resyncTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(options: ControllerOptions) {
    this.options = options;
    const quotas = options.quotas ?? DEFAULT_QUOTAS;
    this.processes = new ProcessQuota(quotas.maxProcesses);
    this.functionGate = new FairGate({ slots: options.functionConcurrency ?? 4 });
    this.buildGate = new FairGate({ slots: options.buildConcurrency ?? 4 });
    // A build or rollout that ends queues its function again: the next pass takes its outcome.
    this.builds = new InFlight((key) => this.functionQueue.add(key));
    // A drift repaired while a rollout of the same revision ran needs another: what the rollout
    // applied may predate it.
    this.rollouts = new InFlight((key) => this.functionQueue.add(key), { rerunWhenAskedAgain: true });
    const backoff = options.backoff ? { backoff: options.backoff } : {};
    const functionDeps = {
      store: options.store,
      builder: options.builder,
      platform: options.platform,
      logger: options.logger,
      externalUrl: options.externalUrl,
      failedBuilds: this.failedBuilds,
      snapshotFor: (fn: SlessFunction) => this.snapshotFor(fn),
      onBuildStarted: (fn: SlessFunction) => options.observer?.buildStarted?.(fn),
      processes: this.processes,
      builds: this.builds,
      rollouts: this.rollouts,
      buildSlot: <T>(fn: SlessFunction, work: () => Promise<T>) =>
        this.buildGate.run(this.fairTaskOf(keyOf(fn)), work),
      ...(options.events ? { events: options.events } : {}),
      ...(options.secrets ? { secrets: options.secrets } : {}),
    };
    this.functionQueue = new WorkQueue({
      ...backoff,
      // The queue keeps one worker per key and coalesces; how many run, and in which order, is the
      // fair gate's call, so the queue itself lets every key through to the gate.
      concurrency: Number.POSITIVE_INFINITY,
      handler: async (key) => {
        const ref = refFromKey('Function', key);
        const result = await this.functionGate.run(this.fairTaskOf(key), () =>
          reconcileAndPatch({
            store: options.store,
            logger: options.logger,
            ref,
            retryDelayMs: () => this.functionQueue.reserveRetry(key),
            reconcile: (fn: SlessFunction, update: StatusUpdate<FunctionStatus>) =>
              reconcileFunction(functionDeps, fn, update),
            finalize: () => finalizeFunction(functionDeps, ref.namespace, ref.name),
          }),
        );
        options.observer?.functionReconciled?.(ref.namespace, ref.name);
        return result.requeueAfterMs === undefined ? undefined : { requeueAfterMs: result.requeueAfterMs };
      },
      onError: (key, error, retryInMs) => {
        if (error instanceof GateStoppedError) return;
        // The reconcile runtime already wrote the failure into status, with this retry's delay.
        this.options.logger.warn(
          { Function: key, err: asError(error).message, retryInMs },
          'Function reconcile failed; retrying',
        );
      },
    });
    this.triggerQueue = new WorkQueue({
      ...backoff,
      handler: (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        return reconcileTrigger(
          { store: options.store, scheduler: options.scheduler, externalUrl: options.externalUrl },
          namespace,
          name,
        );
      },
      onError: (key, error, retryInMs) => this.onReconcileError('Trigger', key, error, retryInMs),
    });
    this.jobQueue = new WorkQueue({
      ...backoff,
      handler: (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        return reconcileJob(
          { store: options.store, builder: options.builder, jobs: options.jobs, logger: options.logger },
          namespace,
          name,
        );
      },
      onError: (key, error, retryInMs) => this.onReconcileError('FunctionJob', key, error, retryInMs),
    });
    this.sourceQueue = new WorkQueue({
      ...backoff,
      handler: async (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        const source = await options.store.get('GitSource', namespace, name);
        if (source) await this.upsertSource(source);
        else await this.removeSource(namespace, name);
      },
      onError: (key, error, retryInMs) => this.onReconcileError('GitSource', key, error, retryInMs),
    });
  }

  /**
   * A reconcile threw: the queue retries it after `retryInMs`. Unless the reconciler already wrote
   * why, status says that it is retrying, so a transient failure is visible and then clears itself.
   */
  private onReconcileError(kind: KindName, key: string, thrown: unknown, retryInMs: number): void {
    const error = asError(thrown);
    this.options.logger.warn(
      { [kind]: key, err: error.message, retryInMs },
      `${kind} reconcile failed; retrying`,
    );
    if (error instanceof RecordedFailure || this.stopped) return;
    const [namespace, name] = key.split('/') as [string, string];
    this.background(
      'record the retry',
      (async () => {
        const object = await this.options.store.get(kind, namespace, name);
        if (!object) return;
        const reason = error instanceof SlessError ? error.reason : Reason.ReconcileFailed;
        const message = `${error.message}; retrying in ${Math.ceil(retryInMs / 1000)}s`;
        const update = new StatusUpdate<BaseStatus>(object)
          .set('Ready', false, reason, message)
          .set('Reconciling', true, Reason.ProgressingWithRetry, message);
        await update.write(this.options.store, object);
      })(),
    );
  }

  async start(): Promise<void> {
    this.unsubscribe = this.options.store.subscribe((event) => this.onEvent(event));
    for (const source of await this.options.store.list('GitSource')) this.sourceQueue.add(keyOf(source));
    await this.sourceQueue.idle();
    // Stopped meanwhile (this replica lost its lease while starting): nothing more to start.
    if (this.stopped) return;
    await this.resync();
    this.resyncTimer = setInterval(
      () => this.background('resync', this.resync()),
      this.options.resyncMs ?? 600_000,
    );
    this.resyncTimer.unref();
  }

  /** Queues every Function, Trigger and FunctionJob, as an informer's resync does. */
  private async resync(): Promise<void> {
    for (const fn of await this.options.store.list('Function')) {
      this.noteFunction(fn);
      this.functionQueue.add(keyOf(fn));
    }
    for (const t of await this.options.store.list('Trigger')) this.triggerQueue.add(keyOf(t));
    for (const j of await this.options.store.list('FunctionJob')) this.jobQueue.add(keyOf(j));
  }

  private noteFunction(fn: SlessFunction): void {
    this.functionTasks.set(keyOf(fn), {
      flow: fn.metadata.labels?.[LABEL_SOURCE] ?? '',
      // Durable on both platforms: a function that has served goes before a cold backlog.
      warm: fn.status?.servingRevision !== undefined,
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.builds.stop();
    this.rollouts.stop();
    this.buildGate.stop();
    for (const slot of this.syncSlots.values()) slot.wake?.();
    clearInterval(this.resyncTimer);
    this.unsubscribe?.();
    this.sourceQueue.stop();
    this.functionQueue.stop();
    this.functionGate.stop();
    this.triggerQueue.stop();
    this.jobQueue.stop();
    const closing = [...this.sources.values()].map((handle) => this.closeHandle(handle));
    this.sources.clear();
    // A fetch in flight still writes into the source cache; the next owner of that directory (a
    // restart in the same process, or whoever removes it) must not find it half-written. Bounded: a
    // hung git server must not hold a shutdown.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(closing),
      new Promise((resolve) => {
        timer = setTimeout(resolve, STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Resolves when no reconcile is queued or running, and no build or rollout runs. */
  async idle(): Promise<void> {
    // A build or rollout that ends queues its function again, so quiet is all of them at once.
    for (;;) {
      await this.functionQueue.idle();
      await this.builds.idle();
      await this.rollouts.idle();
      await this.functionQueue.idle();
      await this.triggerQueue.idle();
      if (this.builds.size === 0 && this.rollouts.size === 0) return;
    }
  }

  /** What the fair gates need of a function, from the store's events rather than a read. */
  private fairTaskOf(key: string): { tenant: string; flow: string; warm: boolean } {
    const seen = this.functionTasks.get(key);
    return { tenant: key.slice(0, key.indexOf('/')), flow: seen?.flow ?? '', warm: seen?.warm ?? false };
  }

  /** Reconciles one Function soon (its workload drifted, for instance). */
  enqueueFunction(namespace: string, name: string): void {
    if (!this.stopped) this.functionQueue.add(`${namespace}/${name}`);
  }

  /** Reconciles one Trigger soon (its CronJob drifted, for instance). */
  enqueueTrigger(namespace: string, name: string): void {
    if (!this.stopped) this.triggerQueue.add(`${namespace}/${name}`);
  }

  /** Forgets a failed build so the next reconcile tries again (the API's "rebuild"). */
  retryBuild(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    this.failedBuilds.delete(key);
    const { builder, store, logger } = this.options;
    if (!builder.discardFailed) {
      this.functionQueue.add(key);
      return;
    }
    // A durable failure (the kube builder's failed Job) must go first, or the retry would attach to it.
    void (async () => {
      const fn = await store.get('Function', namespace, name);
      if (fn) await builder.discardFailed?.(fn);
    })()
      .catch((error: unknown) =>
        logger.warn({ function: key, err: asError(error).message }, 'cannot discard the failed build'),
      )
      .finally(() => this.functionQueue.add(key));
  }

  /**
   * Pins a source to a commit of its branch (undefined unpins) and syncs it at once: the pinned
   * commit's build keys are built already, so its functions serve again without a build.
   */
  async pinSource(
    namespace: string,
    name: string,
    commit: string | undefined,
  ): Promise<SyncResult | undefined> {
    await setPin(
      {
        store: this.options.store,
        readerFor: async (source) => {
          const key = `${namespace}/${name}`;
          if (!this.sources.has(key)) await this.upsertSource(source, false);
          const handle = this.sources.get(key);
          if (!handle) throw new SourceError(`source ${key} cannot be opened`, 'SourceFailed');
          return handle.reader;
        },
      },
      namespace,
      name,
      commit,
    );
    // Forced: the store event of the new spec may have synced already; the answer is the result anyway.
    return this.syncNow(namespace, name, { force: true });
  }

  /**
   * Syncs one source soon (webhooks, polls, the sync endpoint). Syncs of one source never overlap,
   * and at most one waits behind the running one: every request made meanwhile joins that one, since
   * a sync started after a request sees everything the request could have asked for. The waiting sync
   * also starts no sooner than `syncCoalesceMs` after the last one started, unless it is forced, so a
   * storm of webhooks spread over seconds costs one sync per window, not one per delivery, while the
   * first delivery to a quiet source still syncs at once.
   */
  syncNow(
    namespace: string,
    name: string,
    options: { force?: boolean } = {},
  ): Promise<SyncResult | undefined> {
    const key = `${namespace}/${name}`;
    let slot = this.syncSlots.get(key);
    if (!slot) {
      slot = { force: false, lastStartedAt: 0 };
      this.syncSlots.set(key, slot);
    }
    if (options.force) {
      slot.force = true;
      slot.wake?.();
    }
    if (slot.pending) return slot.pending;
    const joined = slot;
    const pending = this.exclusive(key, async () => {
      await this.coalesce(joined);
      joined.pending = undefined;
      const force = joined.force;
      joined.force = false;
      joined.lastStartedAt = Date.now();
      return this.syncOnce(namespace, name, { force });
    });
    joined.pending = pending;
    return pending;
  }

  /** Waits out the rest of the slot's coalescing window; a forced request or stop() ends it early. */
  private coalesce(slot: SyncSlot): Promise<void> {
    const windowMs = this.options.syncCoalesceMs ?? SYNC_COALESCE_MS;
    const waitMs = slot.lastStartedAt + windowMs - Date.now();
    if (slot.force || this.stopped || waitMs <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, waitMs);
      function done(): void {
        clearTimeout(timer);
        slot.wake = undefined;
        resolve();
      }
      slot.wake = done;
    });
  }

  private async syncOnce(
    namespace: string,
    name: string,
    options: { force: boolean },
  ): Promise<SyncResult | undefined> {
    const key = `${namespace}/${name}`;
    const source = await this.options.store.get('GitSource', namespace, name);
    if (!source || this.stopped) return undefined;
    let handle = this.sources.get(key);
    if (!handle) {
      // The status already says why (openSource wrote it); the caller of a sync hears it too.
      const opened = await this.upsertSource(source, false).then(
        () => undefined,
        (thrown: unknown) => asError(thrown),
      );
      handle = this.sources.get(key);
      if (!handle) return this.openFailure(namespace, name, opened);
    }
    const started = Date.now();
    const result = await syncSource(
      {
        store: this.options.store,
        logger: this.options.logger,
        manifests: this.parsedManifests,
        buildKeys: this.buildKeys,
        ...(this.options.repoSecrets ? { repoSecrets: this.options.repoSecrets } : {}),
        maxFunctions: (this.options.quotas ?? DEFAULT_QUOTAS).maxFunctions,
        // Known before anything is applied, so the reconciles the apply starts need not read again.
        planned: (plan) =>
          this.manifestFiles.set(`${key}@${plan.commit}`, Promise.resolve(plan.manifestFiles)),
      },
      source,
      handle.reader,
      options,
    );
    this.recordSync(source, result);
    this.options.observer?.syncFinished?.(source, result, Date.now() - started);
    return result;
  }

  /** A sync that could not open its source: the reason and message its status now carries. */
  private async openFailure(namespace: string, name: string, error: Error | undefined): Promise<SyncResult> {
    const after = await this.options.store.get('GitSource', namespace, name);
    const ready = (after?.status as GitSourceStatus | undefined)?.conditions?.find((c) => c.type === 'Ready');
    const cause = error?.cause instanceof Error ? error.cause : error;
    return {
      outcome: 'failed',
      ...(ready?.status === 'False' ? { reason: ready.reason } : {}),
      message:
        ready?.status === 'False'
          ? ready.message
          : (cause?.message ?? `source ${namespace}/${name} cannot be opened`),
    };
  }

  private recordSync(source: GitSource, result: SyncResult): void {
    const events = this.options.events;
    if (!events) return;
    if (result.outcome === 'synced') {
      events.record(
        source,
        'Normal',
        Reason.Synced,
        result.message ?? `synced ${result.commit?.slice(0, 12)}`,
      );
      for (const pruned of result.pruned ?? [])
        events.record(source, 'Normal', Reason.Pruned, `pruned ${pruned} (no longer in the repository)`);
    } else if (result.outcome === 'invalid')
      events.record(source, 'Warning', Reason.ValidationFailed, result.message ?? 'manifests rejected');
    else if (result.outcome === 'failed')
      events.record(source, 'Warning', Reason.SyncFailed, result.message ?? 'sync failed');
  }

  private exclusive<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    const settled = next.catch(() => undefined);
    this.locks.set(key, settled);
    void settled.then(() => {
      if (this.locks.get(key) === settled) this.locks.delete(key);
    });
    return next;
  }

  /**
   * Fire-and-forget work must not become an unhandled rejection: against a real API server any call
   * can fail for a moment (a reset connection), and Node ends the process on an unhandled rejection.
   */
  private background(what: string, task: Promise<unknown>): void {
    task.catch((error: unknown) => {
      if (!this.stopped) this.options.logger.warn({ err: asError(error).message }, `${what} failed`);
    });
  }

  private onEvent(event: StoreEvent): void {
    if (this.stopped) return;
    const object = event.object;
    const key = `${object.metadata.namespace}/${object.metadata.name}`;
    switch (object.kind) {
      case 'GitSource':
        if (event.type === 'DELETED' || !event.statusOnly) this.sourceQueue.add(key);
        break;
      case 'Function':
        if (event.type === 'DELETED') this.functionTasks.delete(key);
        else this.noteFunction(object as SlessFunction);
        if (!event.statusOnly) {
          this.functionQueue.add(key);
          this.background(
            'enqueue dependents',
            this.enqueueDependents(object.metadata.namespace, object.metadata.name),
          );
        } else if (object.status?.phase === 'Ready') {
          // Jobs waiting for this function's first build can run now.
          this.background(
            'enqueue pending jobs',
            this.enqueueDependents(object.metadata.namespace, object.metadata.name, true),
          );
        }
        break;
      case 'Trigger':
        if (!event.statusOnly) {
          this.triggerQueue.add(key);
          this.functionQueue.add(`${object.metadata.namespace}/${(object as Trigger).spec.function}`);
        }
        break;
      case 'FunctionJob':
        if (!event.statusOnly) this.jobQueue.add(key);
        break;
      default:
        break;
    }
  }

  /**
   * From the store's watch cache where it keeps one: every Function event (a thousand at a large
   * commit's apply) would otherwise list its namespace's Triggers and FunctionJobs. A dependent the
   * cache does not hold yet is queued by its own event.
   */
  private async enqueueDependents(namespace: string, fnName: string, pendingJobsOnly = false): Promise<void> {
    const { store } = this.options;
    const dependsOn = (object: Trigger | FunctionJob) =>
      object.metadata.namespace === namespace && object.spec.function === fnName;
    if (!pendingJobsOnly) {
      for (const t of store.cached?.('Trigger', dependsOn) ?? (await store.list('Trigger', { namespace }))) {
        if (t.spec.function === fnName) this.triggerQueue.add(`${namespace}/${t.metadata.name}`);
      }
    }
    const jobs = store.cached?.('FunctionJob', dependsOn) ?? (await store.list('FunctionJob', { namespace }));
    for (const j of jobs) {
      if (j.spec.function !== fnName) continue;
      if (pendingJobsOnly && j.status?.phase !== 'Pending') continue;
      this.jobQueue.add(`${namespace}/${j.metadata.name}`);
    }
  }

  /**
   * Opens (or re-opens) a source's reader and (re)arms its poll. The source queue, a sync and a pin
   * may all ask at once; they take turns, or two readers would share one cache directory and the
   * loser's poll timer would run on forever.
   */
  private upsertSource(source: GitSource, syncImmediately = true): Promise<void> {
    const key = `${source.metadata.namespace}/${source.metadata.name}`;
    return this.exclusive(`open:${key}`, () => this.openSource(key, source, syncImmediately));
  }

  private async openSource(key: string, source: GitSource, syncImmediately: boolean): Promise<void> {
    const identity = JSON.stringify([source.spec.url, source.spec.branch, source.spec.secretRef?.name]);
    let handle = this.sources.get(key);
    if (!handle || handle.identity !== identity) {
      if (handle) void this.closeHandle(handle);
      try {
        const reader = await this.options.readers.create(source);
        handle = { reader, identity };
        this.sources.set(key, handle);
        const watched = handle;
        handle.unwatch = reader.watch?.(() => {
          clearTimeout(watched.debounce);
          // Several ref files change per commit; one sync covers them all.
          watched.debounce = setTimeout(
            () => this.background('sync', this.syncNow(source.metadata.namespace, source.metadata.name)),
            15,
          );
        });
      } catch (thrown) {
        const error = asError(thrown);
        const reason = error instanceof SlessError ? error.reason : Reason.SourceFailed;
        const update = new StatusUpdate<GitSourceStatus>(source).set('Ready', false, reason, error.message);
        update.status.phase = 'Failed';
        await update.write(this.options.store, source);
        // A missing secret or an unreachable server may be fixed without a change to the source.
        throw new RecordedFailure(`cannot open source ${key}: ${error.message}`, error);
      }
    }
    clearInterval(handle.timer);
    const interval = parseDuration(source.spec.interval ?? '1m');
    handle.timer = setInterval(
      () => this.background('sync', this.syncNow(source.metadata.namespace, source.metadata.name)),
      interval,
    );
    handle.timer.unref();
    if (syncImmediately)
      this.background('sync', this.syncNow(source.metadata.namespace, source.metadata.name));
  }

  /** Prunes everything a deleted source applied (its finalizer waits for this). */
  finalizeSource(namespace: string, name: string): Promise<void> {
    return this.removeSource(namespace, name);
  }

  private async removeSource(namespace: string, name: string): Promise<void> {
    const key = `${namespace}/${name}`;
    const handle = this.sources.get(key);
    if (handle) void this.closeHandle(handle);
    this.sources.delete(key);
    this.syncSlots.delete(key);
    // What a source applied goes with it, as a Kustomization's prune does.
    await this.exclusive(key, async () => {
      for (const kind of [...REPO_KINDS].reverse()) {
        const owned = await this.options.store.list(kind, { namespace, labels: { [LABEL_SOURCE]: name } });
        for (const o of owned) await this.options.store.delete(kind, o.metadata.namespace, o.metadata.name);
      }
      await this.options.repoSecrets?.prune(namespace, name);
    });
  }

  private closeHandle(handle: SourceHandle): Promise<void> {
    clearInterval(handle.timer);
    clearTimeout(handle.debounce);
    handle.unwatch?.();
    return handle.reader.close?.() ?? Promise.resolve();
  }

  private async snapshotFor(
    fn: SlessFunction,
  ): Promise<{ snapshot: SourceSnapshot; manifestFiles: ReadonlySet<string> }> {
    const sourceName = fn.metadata.labels?.[LABEL_SOURCE];
    const commit = fn.metadata.annotations?.[ANNOTATION_COMMIT];
    const key = `${fn.metadata.namespace}/${sourceName}`;
    const handle = sourceName ? this.sources.get(key) : undefined;
    if (!handle || !commit)
      throw new Error(`source "${sourceName ?? ''}" of function ${fn.metadata.name} is not available`);
    const snapshot = await handle.reader.snapshot(commit);
    const cacheKey = `${key}@${commit}`;
    let files = this.manifestFiles.get(cacheKey);
    if (!files) {
      files = (async () => {
        const source = await this.options.store.get('GitSource', fn.metadata.namespace, sourceName as string);
        return (
          await loadManifests(snapshot, {
            root: source?.spec.path ?? '.',
            namespace: fn.metadata.namespace,
            cache: this.parsedManifests,
          })
        ).manifestFiles;
      })();
      this.manifestFiles.set(cacheKey, files);
      files.catch(() => this.manifestFiles.delete(cacheKey));
    }
    return { snapshot, manifestFiles: await files };
  }
}

function keyOf(object: { metadata: { namespace: string; name: string } }): string {
  return `${object.metadata.namespace}/${object.metadata.name}`;
}
