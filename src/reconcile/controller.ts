/**
 * The control loop shared by both platforms: one work queue per kind, each running its kind's
 * reconciler (gitsource/, function/, trigger/, job/) through the reconcile runtime, fed by the
 * store's events and a periodic resync. Source readers and sync scheduling live in gitsource/; the
 * fair gates decide which Function reconciles and builds run. Platforms plug in through ObjectStore,
 * Builder, WorkloadPlatform, JobRunner, TriggerScheduler and SourceReaderFactory.
 */

import type { Logger } from 'pino';
import { asError } from '../core/errors.js';
import { FairGate, GateStoppedError } from '../core/fair-gate.js';
import type {
  Builder,
  EventRecorder,
  FunctionLeftovers,
  JobOutcome,
  JobRunner,
  ObjectStore,
  SourceReaderFactory,
  StoreEvent,
  TriggerScheduler,
  WorkloadPlatform,
} from '../core/interfaces.js';
import { objectKey } from '../core/object-key.js';
import { DEFAULT_QUOTAS, type Quotas } from '../core/quotas.js';
import type { ReconcileRequest, ReconcileRequests } from '../core/reconcile-requests.js';
import {
  type BuildRecord,
  type FunctionJob,
  type FunctionJobStatus,
  type FunctionStatus,
  type GitSource,
  type GitSourceStatus,
  LABEL_SOURCE,
  type SlessFunction,
  type Trigger,
  type TriggerStatus,
} from '../core/resources.js';
import type { KindName } from '../core/schemas.js';
import type { StatusUpdate } from '../core/status.js';
import { type BackoffOptions, WorkQueue } from '../core/work-queue.js';
import { ParsedManifestCache } from '../manifest/load.js';
import type { SecretReader } from '../secrets/references.js';
import type { RepoSecrets } from '../secrets/repo-secrets.js';
import { finalizeFunction, reconcileFunction } from './function/reconciler.js';
import { SourceReaders } from './gitsource/readers.js';
import {
  finalizeGitSource,
  type GitSourceReconcileDeps,
  reconcileGitSource,
} from './gitsource/reconciler.js';
import { SourceSyncs, SYNC_COALESCE_MS } from './gitsource/syncs.js';
import { finalizeJob, reconcileJob } from './job/reconciler.js';
import { setPin } from './pin.js';
import { BuildKeyCache } from './plan.js';
import { ProcessQuota } from './process-quota.js';
import { InFlight } from './runtime/in-flight.js';
import { refFromKey, refKey } from './runtime/object-ref.js';
import { reconcileAndPatch } from './runtime/patch.js';
import type { SyncResult } from './source-sync.js';
import { finalizeTrigger, reconcileTrigger } from './trigger/reconciler.js';

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
  /** What a deleted Function leaves beyond its workload (builds); nothing when omitted. */
  functionLeftovers?: FunctionLeftovers;
  /**
   * What watchers other than the store ask to have reconciled (a process that exited, a cron that
   * fired, a workload edited by hand, a GitSource the kube store saw deleting): listened to from
   * start to stop.
   */
  requests?: ReconcileRequests;
}

export interface ControllerObserver {
  syncFinished?(source: GitSource, result: SyncResult, durationMs: number): void;
  buildStarted?(fn: SlessFunction): void;
  /** A Function reconcile finished without error (its object may be gone: a deletion). */
  functionReconciled?(namespace: string, name: string): void;
}

export { SYNC_COALESCE_MS } from './gitsource/syncs.js';

export class Controller {
  private readonly options: ControllerOptions;
  private readonly parsedManifests = new ParsedManifestCache();
  private readonly readers: SourceReaders;
  private readonly syncs: SourceSyncs;
  private readonly sourceDeps: GitSourceReconcileDeps;
  private readonly buildKeys = new BuildKeyCache();
  private readonly failedBuilds = new Map<string, BuildRecord>();
  private readonly functionQueue: WorkQueue;
  /** Fair shares between namespaces and sources for function reconciles (and so for builds). */
  private readonly functionGate: FairGate;
  /** Fair shares between namespaces and sources for builds. */
  private readonly buildGate: FairGate;
  private readonly builds: InFlight<BuildRecord>;
  private readonly rollouts: InFlight<void>;
  private readonly jobRuns: InFlight<JobOutcome>;
  /** What the fair gate needs of each Function, as the store's events last showed it. */
  private readonly functionTasks = new Map<string, { flow: string; warm: boolean }>();
  private readonly processes: ProcessQuota;
  private readonly triggerQueue: WorkQueue;
  private readonly jobQueue: WorkQueue;
  private readonly sourceQueue: WorkQueue;
  private resyncTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopListening: (() => void) | undefined;
  private stopped = false;

  constructor(options: ControllerOptions) {
    this.options = options;
    const quotas = options.quotas ?? DEFAULT_QUOTAS;
    // A function refused for want of room starts once its namespace has some again.
    this.processes = new ProcessQuota(quotas.maxProcesses, (namespace, name) =>
      this.enqueueFunction(namespace, name),
    );
    this.functionGate = new FairGate({ slots: options.functionConcurrency ?? 4 });
    this.buildGate = new FairGate({ slots: options.buildConcurrency ?? 4 });
    // A build or rollout that ends queues its function again: the next pass takes its outcome.
    this.builds = new InFlight((key) => this.functionQueue.add(key));
    // A drift repaired while a rollout of the same revision ran needs another: what the rollout
    // applied may predate it.
    this.rollouts = new InFlight((key) => this.functionQueue.add(key), { rerunWhenAskedAgain: true });
    const backoff = options.backoff ? { backoff: options.backoff } : {};
    this.readers = new SourceReaders({
      factory: options.readers,
      store: options.store,
      parsedManifests: this.parsedManifests,
      wake: (namespace, name) => this.requestSync(namespace, name),
      ...(options.repoSecrets ? { repoSecrets: options.repoSecrets } : {}),
    });
    this.syncs = new SourceSyncs({
      store: options.store,
      logger: options.logger,
      readers: this.readers,
      parsedManifests: this.parsedManifests,
      buildKeys: this.buildKeys,
      maxFunctions: quotas.maxFunctions,
      coalesceMs: options.syncCoalesceMs ?? SYNC_COALESCE_MS,
      ...(options.repoSecrets ? { repoSecrets: options.repoSecrets } : {}),
      open: (namespace, name) => this.reconcileSourcePass(refKey({ namespace, name }), false),
      ...(options.events ? { events: options.events } : {}),
      finished: (source, result, durationMs) => options.observer?.syncFinished?.(source, result, durationMs),
    });
    this.sourceDeps = {
      store: options.store,
      readers: this.readers,
      syncs: this.syncs,
      requestSync: (namespace, name) => this.requestSync(namespace, name),
    };
    const functionDeps = {
      store: options.store,
      builder: options.builder,
      platform: options.platform,
      logger: options.logger,
      externalUrl: options.externalUrl,
      failedBuilds: this.failedBuilds,
      snapshotFor: (fn: SlessFunction) => this.readers.snapshotFor(fn),
      onBuildStarted: (fn: SlessFunction) => options.observer?.buildStarted?.(fn),
      processes: this.processes,
      builds: this.builds,
      rollouts: this.rollouts,
      buildSlot: <T>(fn: SlessFunction, work: () => Promise<T>) =>
        this.buildGate.run(this.fairTaskOf(keyOf(fn)), work),
      ...(options.events ? { events: options.events } : {}),
      ...(options.secrets ? { secrets: options.secrets } : {}),
      ...(options.functionLeftovers ? { leftovers: options.functionLeftovers } : {}),
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
    const triggerDeps = {
      store: options.store,
      scheduler: options.scheduler,
      externalUrl: options.externalUrl,
    };
    this.triggerQueue = new WorkQueue({
      ...backoff,
      handler: async (key) => {
        const ref = refFromKey('Trigger', key);
        await reconcileAndPatch({
          store: options.store,
          logger: options.logger,
          ref,
          retryDelayMs: () => this.triggerQueue.reserveRetry(key),
          reconcile: (trigger: Trigger, update: StatusUpdate<TriggerStatus>) =>
            reconcileTrigger(triggerDeps, trigger, update),
          finalize: () => finalizeTrigger(triggerDeps, ref.namespace, ref.name),
        });
      },
      onError: (key, error, retryInMs) => this.logRetry('Trigger', key, error, retryInMs),
    });
    // A run that ends queues its job again: the next pass takes its outcome.
    this.jobRuns = new InFlight((key) => this.jobQueue.add(key));
    const jobDeps = {
      store: options.store,
      builder: options.builder,
      jobs: options.jobs,
      logger: options.logger,
      runs: this.jobRuns,
    };
    this.jobQueue = new WorkQueue({
      ...backoff,
      handler: async (key) => {
        const ref = refFromKey('FunctionJob', key);
        await reconcileAndPatch({
          store: options.store,
          logger: options.logger,
          ref,
          retryDelayMs: () => this.jobQueue.reserveRetry(key),
          reconcile: (job: FunctionJob, update: StatusUpdate<FunctionJobStatus>) =>
            reconcileJob(jobDeps, job, update),
          finalize: () => finalizeJob(jobDeps, ref.namespace, ref.name),
        });
      },
      onError: (key, error, retryInMs) => this.logRetry('FunctionJob', key, error, retryInMs),
    });
    this.sourceQueue = new WorkQueue({
      ...backoff,
      handler: async (key) => {
        await this.reconcileSourcePass(key, true);
      },
      onError: (key, error, retryInMs) => this.logRetry('GitSource', key, error, retryInMs),
    });
  }

  /** A reconcile threw; the runtime already wrote why into status, with this retry's delay. */
  private logRetry(kind: KindName, key: string, thrown: unknown, retryInMs: number): void {
    if (thrown instanceof GateStoppedError) return;
    this.options.logger.warn(
      { [kind]: key, err: asError(thrown).message, retryInMs },
      `${kind} reconcile failed; retrying`,
    );
  }

  /**
   * One pass of the GitSource reconciler: open (or re-open) the source's reader and arm its poll,
   * or say in status why it cannot be opened. The source queue runs it on every change of a source,
   * and a sync runs it when it finds no reader, so both report an unopenable source the same way.
   */
  private reconcileSourcePass(key: string, sync: boolean): Promise<unknown> {
    const ref = refFromKey('GitSource', key);
    return reconcileAndPatch({
      store: this.options.store,
      logger: this.options.logger,
      ref,
      retryDelayMs: () => this.sourceQueue.reserveRetry(key),
      reconcile: (source: GitSource, update: StatusUpdate<GitSourceStatus>) =>
        reconcileGitSource(this.sourceDeps, source, update, { sync }),
      finalize: () => finalizeGitSource(this.sourceDeps, ref.namespace, ref.name),
    });
  }

  /** A poll, a ref change or a new source: a sync soon, its failure logged (status has it too). */
  private requestSync(namespace: string, name: string): void {
    if (!this.stopped) this.background('sync', this.syncNow(namespace, name));
  }

  async start(): Promise<void> {
    this.unsubscribe = this.options.store.subscribe((event) => this.onEvent(event));
    this.stopListening = this.options.requests?.subscribe((request) => this.onRequest(request));
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
    this.jobRuns.stop();
    this.buildGate.stop();
    this.syncs.stop();
    clearInterval(this.resyncTimer);
    this.unsubscribe?.();
    this.stopListening?.();
    this.sourceQueue.stop();
    this.functionQueue.stop();
    this.functionGate.stop();
    this.triggerQueue.stop();
    this.jobQueue.stop();
    await this.readers.closeAll();
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

  private onRequest(request: ReconcileRequest): void {
    const key = objectKey(request.namespace, request.name);
    if (request.kind === 'Function') this.enqueueFunction(request.namespace, request.name);
    else if (request.kind === 'Trigger') this.enqueueTrigger(request.namespace, request.name);
    // A source being deleted: its reconcile finds it gone and runs the finalizer.
    else if (this.stopped) return;
    else if (request.kind === 'GitSource') this.sourceQueue.add(key);
    else this.jobQueue.add(key);
  }

  /** Reconciles one Function soon (its workload drifted, for instance). */
  enqueueFunction(namespace: string, name: string): void {
    if (!this.stopped) this.functionQueue.add(objectKey(namespace, name));
  }

  /** Reconciles one Trigger soon (its CronJob drifted, for instance). */
  enqueueTrigger(namespace: string, name: string): void {
    if (!this.stopped) this.triggerQueue.add(objectKey(namespace, name));
  }

  /** Forgets a failed build so the next reconcile tries again (the API's "rebuild"). */
  retryBuild(namespace: string, name: string): void {
    const key = objectKey(namespace, name);
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
        readerFor: async (source) => this.readers.get(namespace, name) ?? this.readers.open(source),
      },
      namespace,
      name,
      commit,
    );
    // Forced: the store event of the new spec may have synced already; the answer is the result anyway.
    return this.syncNow(namespace, name, { force: true });
  }

  /** Syncs one source soon (webhooks, polls, the sync endpoint): see SourceSyncs. */
  syncNow(
    namespace: string,
    name: string,
    options: { force?: boolean } = {},
  ): Promise<SyncResult | undefined> {
    return this.syncs.syncNow(namespace, name, options);
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
    const key = objectKey(object.metadata.namespace, object.metadata.name);
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
        if (t.spec.function === fnName) this.triggerQueue.add(objectKey(namespace, t.metadata.name));
      }
    }
    const jobs = store.cached?.('FunctionJob', dependsOn) ?? (await store.list('FunctionJob', { namespace }));
    for (const j of jobs) {
      if (j.spec.function !== fnName) continue;
      if (pendingJobsOnly && j.status?.phase !== 'Pending') continue;
      this.jobQueue.add(objectKey(namespace, j.metadata.name));
    }
  }
}

function keyOf(object: { metadata: { namespace: string; name: string } }): string {
  return objectKey(object.metadata.namespace, object.metadata.name);
}
