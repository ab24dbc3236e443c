/**
 * The control loop shared by both platforms: it keeps one reader per GitSource, polls at the source's
 * interval (and on ref changes for local repositories), syncs, and reconciles Functions from a keyed
 * work queue. Platforms plug in through ObjectStore, Builder, WorkloadPlatform and SourceReaderFactory.
 */
import type { Logger } from 'pino';
import { parseDuration } from '../core/duration.js';
import { asError, SourceError } from '../core/errors.js';
import { FairGate, GateStoppedError } from '../core/fair-gate.js';
import type {
  Builder,
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
  type BuildRecord,
  type FunctionJob,
  type GitSource,
  LABEL_SOURCE,
  type SlessFunction,
  type Trigger,
} from '../core/resources.js';
import { REPO_KINDS } from '../core/schemas.js';
import { WorkQueue } from '../core/work-queue.js';
import { loadManifests, ParsedManifestCache } from '../manifest/load.js';
import { reconcileFunction } from './function-reconcile.js';
import { reconcileJob } from './job-reconcile.js';
import { setPin } from './pin.js';
import { ProcessQuota } from './process-quota.js';
import { type SyncResult, syncSource } from './source-sync.js';
import { reconcileTrigger } from './trigger-reconcile.js';

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
   * Functions reconciled at once (default 4). A kube reconcile waits minutes on its kaniko Job while
   * doing nothing, so the kube platform raises it: one long build must not hold up other functions.
   */
  functionConcurrency?: number;
  /** Per-namespace limits; DEFAULT_QUOTAS when omitted. */
  quotas?: Quotas;
}

export interface ControllerObserver {
  syncFinished?(source: GitSource, result: SyncResult, durationMs: number): void;
  buildStarted?(fn: SlessFunction): void;
}

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
  private readonly manifestFiles = new Map<string, Promise<ReadonlySet<string>>>();
  private readonly parsedManifests = new ParsedManifestCache();
  private readonly failedBuilds = new Map<string, BuildRecord>();
  private readonly functionQueue: WorkQueue;
  /** Fair shares between namespaces and sources for function reconciles (and so for builds). */
  private readonly functionGate: FairGate;
  private readonly processes: ProcessQuota;
  private readonly triggerQueue: WorkQueue;
  private readonly jobQueue: WorkQueue;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(options: ControllerOptions) {
    this.options = options;
    const quotas = options.quotas ?? DEFAULT_QUOTAS;
    this.processes = new ProcessQuota(quotas.maxProcesses);
    this.functionGate = new FairGate({ slots: options.functionConcurrency ?? 4 });
    this.functionQueue = new WorkQueue({
      // The queue keeps one worker per key and coalesces; how many run, and in which order, is the
      // fair gate's call, so the queue itself lets every key through to the gate.
      concurrency: Number.POSITIVE_INFINITY,
      handler: async (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        const fn = (await options.store.get('Function', namespace, name)) as SlessFunction | undefined;
        const task = {
          tenant: namespace,
          flow: fn?.metadata.labels?.[LABEL_SOURCE] ?? '',
          // Durable on both platforms: a function that has served goes before a cold backlog.
          warm: fn?.status?.servingRevision !== undefined,
        };
        return this.functionGate.run(task, () =>
          reconcileFunction(
            {
              store: options.store,
              builder: options.builder,
              platform: options.platform,
              logger: options.logger,
              externalUrl: options.externalUrl,
              failedBuilds: this.failedBuilds,
              snapshotFor: (fn) => this.snapshotFor(fn),
              onBuildStarted: (fn) => options.observer?.buildStarted?.(fn),
              processes: this.processes,
            },
            namespace,
            name,
          ),
        );
      },
      onError: (key, error) => {
        if (!(error instanceof GateStoppedError))
          options.logger.error({ function: key, err: asError(error).message }, 'reconcile failed');
      },
    });
    this.triggerQueue = new WorkQueue({
      handler: (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        return reconcileTrigger(
          { store: options.store, scheduler: options.scheduler, externalUrl: options.externalUrl },
          namespace,
          name,
        );
      },
      onError: (key, error) =>
        options.logger.error({ trigger: key, err: asError(error).message }, 'trigger reconcile failed'),
    });
    this.jobQueue = new WorkQueue({
      handler: (key) => {
        const [namespace, name] = key.split('/') as [string, string];
        return reconcileJob(
          { store: options.store, builder: options.builder, jobs: options.jobs, logger: options.logger },
          namespace,
          name,
        );
      },
      onError: (key, error) =>
        options.logger.error({ job: key, err: asError(error).message }, 'job reconcile failed'),
    });
  }

  async start(): Promise<void> {
    this.unsubscribe = this.options.store.subscribe((event) => this.onEvent(event));
    for (const source of (await this.options.store.list('GitSource')) as GitSource[])
      await this.upsertSource(source);
    for (const fn of await this.options.store.list('Function'))
      this.functionQueue.add(`${fn.metadata.namespace}/${fn.metadata.name}`);
    for (const t of await this.options.store.list('Trigger'))
      this.triggerQueue.add(`${t.metadata.namespace}/${t.metadata.name}`);
    for (const j of await this.options.store.list('FunctionJob'))
      this.jobQueue.add(`${j.metadata.namespace}/${j.metadata.name}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.functionQueue.stop();
    this.functionGate.stop();
    this.triggerQueue.stop();
    this.jobQueue.stop();
    for (const handle of this.sources.values()) this.closeHandle(handle);
    this.sources.clear();
  }

  /** Resolves when no reconcile is queued or running. */
  async idle(): Promise<void> {
    await this.functionQueue.idle();
    await this.triggerQueue.idle();
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
      const fn = (await store.get('Function', namespace, name)) as SlessFunction | undefined;
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

  /** Syncs one source now (webhooks, the sync endpoint); syncs of one source never overlap. */
  async syncNow(
    namespace: string,
    name: string,
    options: { force?: boolean } = {},
  ): Promise<SyncResult | undefined> {
    const key = `${namespace}/${name}`;
    return this.exclusive(key, async () => {
      const source = (await this.options.store.get('GitSource', namespace, name)) as GitSource | undefined;
      if (!source || this.stopped) return undefined;
      let handle = this.sources.get(key);
      if (!handle) {
        await this.upsertSource(source, false);
        handle = this.sources.get(key);
      }
      if (!handle) return undefined;
      const started = Date.now();
      const result = await syncSource(
        {
          store: this.options.store,
          logger: this.options.logger,
          manifests: this.parsedManifests,
          maxFunctions: (this.options.quotas ?? DEFAULT_QUOTAS).maxFunctions,
          // Known before anything is applied, so the reconciles the apply starts need not read again.
          planned: (plan) =>
            this.manifestFiles.set(`${key}@${plan.commit}`, Promise.resolve(plan.manifestFiles)),
        },
        source,
        handle.reader,
        options,
      );
      this.options.observer?.syncFinished?.(source, result, Date.now() - started);
      return result;
    });
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
        if (event.type === 'DELETED') this.background('remove source', this.removeSource(object));
        else if (!event.statusOnly) this.background('open source', this.upsertSource(object));
        break;
      case 'Function':
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

  private async enqueueDependents(namespace: string, fnName: string, pendingJobsOnly = false): Promise<void> {
    if (!pendingJobsOnly) {
      for (const t of (await this.options.store.list('Trigger', { namespace })) as Trigger[]) {
        if (t.spec.function === fnName) this.triggerQueue.add(`${namespace}/${t.metadata.name}`);
      }
    }
    for (const j of (await this.options.store.list('FunctionJob', { namespace })) as FunctionJob[]) {
      if (j.spec.function !== fnName) continue;
      if (pendingJobsOnly && j.status?.phase !== 'Pending') continue;
      this.jobQueue.add(`${namespace}/${j.metadata.name}`);
    }
  }

  private async upsertSource(source: GitSource, syncImmediately = true): Promise<void> {
    const key = `${source.metadata.namespace}/${source.metadata.name}`;
    const identity = JSON.stringify([source.spec.url, source.spec.branch, source.spec.secretRef?.name]);
    let handle = this.sources.get(key);
    if (!handle || handle.identity !== identity) {
      if (handle) this.closeHandle(handle);
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
        this.options.logger.error({ source: key, err: error.message }, 'cannot open source');
        await this.options.store.patchStatus(source, {
          phase: 'Failed',
          conditions: [
            {
              type: 'Ready',
              status: 'False',
              reason: 'SourceFailed',
              message: error.message,
              observedGeneration: source.metadata.generation ?? 1,
              lastTransitionTime: new Date().toISOString(),
            },
          ],
        });
        return;
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

  private async removeSource(source: GitSource): Promise<void> {
    const key = `${source.metadata.namespace}/${source.metadata.name}`;
    const handle = this.sources.get(key);
    if (handle) this.closeHandle(handle);
    this.sources.delete(key);
    // What a source applied goes with it, as a Kustomization's prune does.
    await this.exclusive(key, async () => {
      for (const kind of [...REPO_KINDS].reverse()) {
        const owned = await this.options.store.list(kind, {
          namespace: source.metadata.namespace,
          labels: { [LABEL_SOURCE]: source.metadata.name },
        });
        for (const o of owned) await this.options.store.delete(kind, o.metadata.namespace, o.metadata.name);
      }
    });
  }

  private closeHandle(handle: SourceHandle): void {
    clearInterval(handle.timer);
    clearTimeout(handle.debounce);
    handle.unwatch?.();
    handle.reader.close?.();
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
        const source = (await this.options.store.get(
          'GitSource',
          fn.metadata.namespace,
          sourceName as string,
        )) as GitSource | undefined;
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
