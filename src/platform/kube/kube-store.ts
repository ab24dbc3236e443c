/**
 * ObjectStore over the sless CRDs. Desired state is written with server-side apply under one field
 * manager (never a read-modify-write Update, which fails with "object has been modified" whenever
 * another writer got there first), status through the status subresource, and changes arrive
 * through a watch per kind that re-lists when the watch expires (410 Gone).
 *
 * `statusOnly` is computed against the last object seen for the same key: generation, labels,
 * annotations, finalizers and deletion unchanged means only status moved. That is what keeps the
 * controller's own status writes from re-triggering reconciles, a loop that would start build after
 * build of the same function.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import type { ListOptions, ObjectStore, StoreEvent, WatchEventType } from '../../core/interfaces.js';
import type { ReconcileRequests } from '../../core/reconcile-requests.js';
import type { AnyResource, ResourceOf } from '../../core/resources.js';
import { KIND_NAMES, type KindName } from '../../core/schemas.js';
import { isStatus, JSON_PATCH, type KubeHttp, MERGE_PATCH } from './http.js';
import { apply, deleteObject, getObject, type KubeMeta, type KubeObject, listObjects } from './objects.js';
import { collectionPath, objectPath, slessType } from './resource-types.js';
import { statusMergePatch } from './status-patch.js';
import { watchCollection } from './watch.js';

/** Cleans what owner references cannot reach before a Function goes away. */
export const FUNCTION_FINALIZER = 'sless.dev/cleanup';

export interface KubeStoreOptions {
  http: KubeHttp;
  logger: Logger;
  /** Namespaces to watch; undefined watches all of them. */
  namespaces?: readonly string[];
  /**
   * Where a deleting GitSource or Function holding the finalizer is asked to be reconciled: its
   * reconciler cleans up (a source prunes what it applied; a Function's builds, contexts and workload
   * go) and then releases the finalizer (releaseFinalizer). Asked again every `finalizerRetryMs` while
   * the finalizer stays, since no controller may listen at the time (the object was deleted while
   * none ran, or before this replica leads); otherwise what it owned would be orphans.
   */
  requests?: Pick<ReconcileRequests, 'request'>;
  /** Delay before a failed watch is retried. */
  retryMs?: number;
  /** How often a deleting object that still holds the finalizer is asked for again. */
  finalizerRetryMs?: number;
}

interface Stream {
  kind: KindName;
  namespace: string | undefined;
  abort?: AbortController;
  /** Its first list is in: `seen` holds every object of its kind and namespace. */
  listed?: boolean;
}

/**
 * Whether resourceVersion `a` is later than `b`. The API server's are etcd revisions, decimal and
 * rising; anything else is not compared, and so never taken as newer.
 */
function newerVersion(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

function keyOf(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`;
}

/** What the store hands out: the API object minus managedFields, which nobody here reads. */
function toResource<K extends KindName = KindName>(object: KubeObject): ResourceOf<K> {
  const { managedFields: _managed, ...metadata } = object.metadata;
  // Read from the kind's own endpoint, so the object is of that kind.
  return { ...object, metadata } as unknown as ResourceOf<K>;
}

/**
 * What the watch cache keeps of an object (client-go's informers take a transform for the same job):
 * managedFields are a third of a Function and nobody reads them here; what the store compares
 * (resourceVersion, generation, labels, annotations, finalizers, deletion) and what `cached` hands out
 * (spec, status) stay.
 */
export function forWatchCache(object: KubeObject): KubeObject {
  if (object.metadata.managedFields === undefined) return object;
  const { managedFields: _managed, ...metadata } = object.metadata;
  return { ...object, metadata };
}

function isDeleting(object: KubeObject | AnyResource): boolean {
  return (object.metadata as KubeMeta).deletionTimestamp !== undefined;
}

function holdsFinalizer(object: KubeObject): boolean {
  return object.metadata.finalizers?.includes(FUNCTION_FINALIZER) ?? false;
}

export class KubeStore implements ObjectStore {
  private readonly options: KubeStoreOptions;
  private readonly http: KubeHttp;
  private readonly listeners = new Set<(event: StoreEvent) => void>();
  private readonly seen = new Map<string, KubeObject>();
  /** Deleting objects whose reconcile will be asked for again (requestFinalize). */
  private readonly askingAgain = new Set<string>();
  private readonly streams: Stream[] = [];
  private started = false;
  private stopped = false;

  constructor(options: KubeStoreOptions) {
    this.options = options;
    this.http = options.http;
  }

  async get<K extends KindName>(
    kind: K,
    namespace: string,
    name: string,
  ): Promise<ResourceOf<K> | undefined> {
    const found = await getObject<KubeObject>(this.http, slessType(kind), namespace, name);
    // A deleting object is gone as far as reconcilers are concerned; only its finalizer still runs.
    return found && !isDeleting(found) ? toResource<K>(found) : undefined;
  }

  async list<K extends KindName>(kind: K, options: ListOptions = {}): Promise<ResourceOf<K>[]> {
    const scopes =
      options.namespace !== undefined ? [options.namespace] : (this.options.namespaces ?? [undefined]);
    const out: ResourceOf<K>[] = [];
    for (const namespace of scopes) {
      const list = await listObjects<KubeObject>(this.http, slessType(kind), {
        ...(namespace !== undefined ? { namespace } : {}),
        ...(options.labels ? { labels: options.labels } : {}),
      });
      for (const item of list.items) if (!isDeleting(item)) out.push(toResource<K>(item));
    }
    return out.sort((a, b) =>
      keyOf(a.kind, a.metadata.namespace, a.metadata.name).localeCompare(
        keyOf(b.kind, b.metadata.namespace, b.metadata.name),
      ),
    );
  }

  async apply(object: AnyResource): Promise<AnyResource> {
    const { name, namespace, labels, annotations } = object.metadata;
    const metadata: KubeMeta = { name, namespace };
    if (labels && Object.keys(labels).length > 0) metadata.labels = labels;
    if (annotations && Object.keys(annotations).length > 0) metadata.annotations = annotations;
    // The finalizer is part of the applied intent, so the same manager owns it and a re-apply keeps it.
    if (object.kind === 'Function' || object.kind === 'GitSource') metadata.finalizers = [FUNCTION_FINALIZER];
    const applied = await apply<KubeObject>(this.http, slessType(object.kind), {
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata,
      spec: object.spec,
    });
    return toResource(applied);
  }

  async patchStatus(object: AnyResource, status: object): Promise<void> {
    const { namespace, name } = object.metadata;
    let written: KubeObject;
    try {
      written = await this.http.request<KubeObject>(
        'PATCH',
        objectPath(slessType(object.kind), namespace, name, 'status'),
        {
          body: { status: statusMergePatch(object.status as Record<string, unknown> | undefined, status) },
          contentType: MERGE_PATCH,
        },
      );
    } catch (error) {
      // The object went away while we worked on it: there is no status left to write.
      if (isStatus(error, 404)) return;
      throw error;
    }
    this.sawWritten({ ...written, kind: object.kind });
  }

  /**
   * An object this store wrote is what its watch reports next: seen now, so that `peek` (the `/fn/`
   * route) answers for the status a client can already read instead of one watch event behind. Only
   * over an older copy: a watch event that came first, or a write of someone else's, is never undone.
   * The watch event for this write then changes nothing (same resourceVersion).
   */
  private sawWritten(object: KubeObject): void {
    const key = keyOf(object.kind, object.metadata.namespace, object.metadata.name);
    const previous = this.seen.get(key);
    if (!previous || !newerVersion(object.metadata.resourceVersion, previous.metadata.resourceVersion))
      return;
    this.handle('MODIFIED', object);
  }

  /**
   * Every object of `kind` as the watches last saw it, without a request: for periodic passes over
   * all Functions, which would otherwise list a thousand objects every few seconds. Undefined until
   * the watches (started by the first subscriber) have listed every namespace once. Only the objects
   * `keep` accepts are copied (it sees the cached object itself and must not change it): a pass that
   * wants a few of a thousand Functions every few seconds would otherwise copy all of them each time.
   */
  cached<K extends KindName>(
    kind: K,
    keep: (object: ResourceOf<K>) => boolean = () => true,
  ): ResourceOf<K>[] | undefined {
    const streams = this.streams.filter((s) => s.kind === kind);
    if (streams.length === 0 || !streams.every((s) => s.listed)) return undefined;
    const out: ResourceOf<K>[] = [];
    for (const object of this.seen.values()) {
      if (object.kind !== kind || isDeleting(object)) continue;
      const resource = toResource<K>(object);
      if (keep(resource)) out.push(structuredClone(resource));
    }
    return out;
  }

  /**
   * One object as the watches last saw it, without a request and without a copy: for the `/fn/`
   * route, which must not ask the API server per request. Callers must not change it. Undefined when
   * absent, deleting, or not listed yet (see `listed`).
   */
  peek<K extends KindName>(kind: K, namespace: string, name: string): ResourceOf<K> | undefined {
    const object = this.seen.get(keyOf(kind, namespace, name));
    return object && !isDeleting(object) ? toResource<K>(object) : undefined;
  }

  /** Whether the watches of `kind` have listed every namespace once (then `peek`'s undefined is absent). */
  listed(kind: KindName): boolean {
    const streams = this.streams.filter((s) => s.kind === kind);
    return streams.length > 0 && streams.every((s) => s.listed);
  }

  /** Starts the watches without a listener: readers of `peek` and `cached` need them on every replica. */
  watch(): void {
    if (!this.started) this.startWatches();
  }

  delete(kind: KindName, namespace: string, name: string): Promise<boolean> {
    return deleteObject(this.http, slessType(kind), namespace, name);
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    if (!this.started) this.startWatches();
    return () => this.listeners.delete(listener);
  }

  stop(): void {
    this.stopped = true;
    for (const stream of this.streams) stream.abort?.abort();
  }

  private startWatches(): void {
    this.started = true;
    const scopes = this.options.namespaces ?? [undefined];
    for (const kind of KIND_NAMES) {
      for (const namespace of scopes) {
        const stream: Stream = { kind, namespace };
        this.streams.push(stream);
        void this.run(stream);
      }
    }
  }

  private async run(stream: Stream): Promise<void> {
    const log = this.options.logger.child({ watch: stream.kind, namespace: stream.namespace ?? '*' });
    let resourceVersion: string | undefined;
    while (!this.stopped) {
      try {
        if (resourceVersion === undefined) {
          resourceVersion = await this.relist(stream);
          stream.listed = true;
        }
        resourceVersion = await this.watchOnce(stream, resourceVersion);
      } catch (thrown) {
        if (this.stopped) return;
        const error = asError(thrown);
        // 410 Gone: our resourceVersion is too old; a fresh list is the only way back in.
        if (isGone(thrown)) {
          log.debug('watch expired; re-listing');
          resourceVersion = undefined;
          continue;
        }
        log.warn({ err: error.message }, 'watch failed; retrying');
        resourceVersion = undefined;
        await new Promise((r) => setTimeout(r, this.options.retryMs ?? 1000));
      }
    }
  }

  private async relist(stream: Stream): Promise<string | undefined> {
    const list = await listObjects<KubeObject>(this.http, slessType(stream.kind), {
      ...(stream.namespace !== undefined ? { namespace: stream.namespace } : {}),
    });
    const present = new Set<string>();
    for (const item of list.items) {
      const object = { ...item, apiVersion: item.apiVersion ?? `sless.dev/v1alpha1`, kind: stream.kind };
      present.add(keyOf(stream.kind, object.metadata.namespace, object.metadata.name));
      this.handle(
        this.seen.has(keyOf(stream.kind, object.metadata.namespace, object.metadata.name))
          ? 'MODIFIED'
          : 'ADDED',
        object,
      );
    }
    // Whatever disappeared while we were not watching is reported as deleted.
    for (const [key, object] of [...this.seen]) {
      if (object.kind !== stream.kind || present.has(key)) continue;
      if (stream.namespace !== undefined && object.metadata.namespace !== stream.namespace) continue;
      this.handle('DELETED', object);
    }
    return list.metadata.resourceVersion;
  }

  /** Watches until the server ends the stream; resolves the last resourceVersion seen. */
  private async watchOnce(stream: Stream, resourceVersion: string | undefined): Promise<string | undefined> {
    let last = resourceVersion;
    let gone = false;
    const abort = new AbortController();
    stream.abort = abort;
    if (this.stopped) abort.abort();
    await watchCollection(
      this.http,
      collectionPath(slessType(stream.kind), stream.namespace),
      { resourceVersion, allowWatchBookmarks: true },
      (phase, object) => {
        if (phase === 'ERROR') {
          const code = (object as unknown as { code?: number }).code;
          if (code === 410) gone = true;
          return;
        }
        if (object?.metadata?.resourceVersion) last = object.metadata.resourceVersion;
        if (phase === 'BOOKMARK') return;
        this.handle(phase, object);
      },
      abort.signal,
    );
    if (gone) throw Object.assign(new Error('watch expired (410 Gone)'), { code: 410 });
    return last;
  }

  private handle(type: WatchEventType, object: KubeObject): void {
    const key = keyOf(object.kind, object.metadata.namespace, object.metadata.name);
    const previous = this.seen.get(key);
    if (type === 'DELETED') {
      this.seen.delete(key);
      // Already reported when its deletion started.
      if (previous && isDeleting(previous)) return;
      this.emit({ type, object: toResource(object), statusOnly: false });
      return;
    }
    if (previous?.metadata.resourceVersion === object.metadata.resourceVersion) return;
    this.seen.set(key, forWatchCache(object));
    if (isDeleting(object)) {
      if (object.kind === 'GitSource' || object.kind === 'Function') this.requestFinalize(object);
      if (!previous || !isDeleting(previous))
        this.emit({ type: 'DELETED', object: toResource(object), statusOnly: false });
      return;
    }
    const statusOnly =
      previous !== undefined &&
      previous.metadata.generation === object.metadata.generation &&
      isDeepStrictEqual(previous.metadata.labels ?? {}, object.metadata.labels ?? {}) &&
      isDeepStrictEqual(previous.metadata.annotations ?? {}, object.metadata.annotations ?? {}) &&
      isDeepStrictEqual(previous.metadata.finalizers ?? [], object.metadata.finalizers ?? []);
    this.emit({ type: previous ? 'MODIFIED' : 'ADDED', object: toResource(object), statusOnly });
  }

  /**
   * Removes only our finalizer, with a guarded JSON patch (no Update), and only from an object being
   * deleted: one created again under the same name meanwhile keeps its own.
   */
  async releaseFinalizer(kind: KindName, namespace: string, name: string): Promise<void> {
    const type = slessType(kind);
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await getObject<KubeObject>(this.http, type, namespace, name);
      const index = current?.metadata.finalizers?.indexOf(FUNCTION_FINALIZER) ?? -1;
      if (!current || !isDeleting(current) || index < 0) return;
      try {
        await this.http.request('PATCH', objectPath(type, namespace, name), {
          body: [
            { op: 'test', path: `/metadata/finalizers/${index}`, value: FUNCTION_FINALIZER },
            { op: 'remove', path: `/metadata/finalizers/${index}` },
          ],
          contentType: JSON_PATCH,
        });
        return;
      } catch (error) {
        // The list moved under us (another finalizer went): read again and retry.
        if (!isStatus(error, 422) && !isStatus(error, 409)) throw error;
      }
    }
  }

  /**
   * A deleting GitSource or Function holding our finalizer is its reconciler's to finalize: asked for
   * now and again every `finalizerRetryMs` while the finalizer stays, since a request nobody listens
   * to (no controller runs here yet, or this replica does not lead) is dropped, and a cleanup that
   * failed is tried again.
   */
  private requestFinalize(object: KubeObject): void {
    const key = keyOf(object.kind, object.metadata.namespace, object.metadata.name);
    const current = this.seen.get(key);
    if (this.stopped || !current || !isDeleting(current) || !holdsFinalizer(current)) return;
    const { namespace, name } = toResource(object).metadata;
    this.options.requests?.request(object.kind as 'GitSource' | 'Function', namespace, name);
    if (this.askingAgain.has(key)) return;
    this.askingAgain.add(key);
    const again = setTimeout(() => {
      this.askingAgain.delete(key);
      this.requestFinalize(object);
    }, this.options.finalizerRetryMs ?? 10_000);
    again.unref();
  }

  private emit(event: StoreEvent): void {
    for (const listener of this.listeners) listener({ ...event, object: structuredClone(event.object) });
  }
}

function isGone(error: unknown): boolean {
  return isStatus(error, 410) || (error as { code?: number } | undefined)?.code === 410;
}
