/**
 * An informer: one kind of object, listed then watched per namespace, held in memory so that readers
 * (the `/fn/` route resolver, the scaler) never ask the API server. When a watch drops, the objects
 * last seen stay as they were (an outage keeps the last known routes) and the list is taken again,
 * with a growing pause, until the API server answers; a 410 Gone re-lists at once.
 */
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import { isStatus, type KubeHttp } from './http.js';
import type { KubeList, KubeObject } from './objects.js';
import { collectionPath, type ResourceType } from './resource-types.js';
import { watchCollection } from './watch.js';

export interface InformerOptions {
  http: KubeHttp;
  type: ResourceType;
  logger: Logger;
  /** Namespaces to watch; all when absent. */
  namespaces?: readonly string[];
  /** A label selector, as the API takes it (`a=b,c` for equality and existence). */
  selector?: string;
  /** The first pause before a failed list or watch is tried again (default 250 ms, doubling to 5 s). */
  retryMs?: number;
  /** Whether managedFields are kept (who owns a field is read from them); dropped by default. */
  keepManagedFields?: boolean;
  /** Called after an object was added, changed or removed (on a re-list too). */
  onChange?: (object: KubeObject, removed: boolean) => void;
}

interface Scope {
  namespace: string | undefined;
  listed: boolean;
  /** The last list or watch request succeeded, and no failure came since. */
  connected: boolean;
  abort?: AbortController;
}

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

/** managedFields are most of an object's bytes and nothing here reads them. */
function trimmed(object: KubeObject): KubeObject {
  if (object.metadata.managedFields === undefined) return object;
  const { managedFields: _managed, ...metadata } = object.metadata;
  return { ...object, metadata };
}

class GoneError extends Error {}

export class Informer {
  private readonly options: InformerOptions;
  private readonly objects = new Map<string, KubeObject>();
  private readonly scopes: Scope[];
  private readonly syncWaiters = new Set<() => void>();
  private started = false;
  private stopped = false;

  constructor(options: InformerOptions) {
    this.options = options;
    this.scopes = (options.namespaces ?? [undefined]).map((namespace) => ({
      namespace,
      listed: false,
      connected: false,
    }));
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    for (const scope of this.scopes) void this.run(scope);
  }

  stop(): void {
    this.stopped = true;
    for (const scope of this.scopes) scope.abort?.abort();
    for (const wake of this.syncWaiters) wake();
  }

  /** The object as last seen; the cached object itself, which callers must not change. */
  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(keyOf(namespace, name));
  }

  /** Every object as last seen (the cached objects themselves). */
  values(): IterableIterator<KubeObject> {
    return this.objects.values();
  }

  /** Every namespace has been listed once: what is absent here is absent (or was, when last seen). */
  synced(): boolean {
    return this.scopes.every((s) => s.listed);
  }

  /** Every namespace's watch is up now: what is here is current, not the last known state. */
  connected(): boolean {
    return this.scopes.every((s) => s.connected);
  }

  /** Resolves once synced, or after `timeoutMs`, whichever comes first; true when synced. */
  async whenSynced(timeoutMs: number): Promise<boolean> {
    if (this.synced() || this.stopped) return this.synced();
    let timer: NodeJS.Timeout | undefined;
    let wake: (() => void) | undefined;
    await new Promise<void>((resolve) => {
      wake = resolve;
      this.syncWaiters.add(resolve);
      timer = setTimeout(resolve, timeoutMs);
    });
    clearTimeout(timer);
    if (wake) this.syncWaiters.delete(wake);
    return this.synced();
  }

  private async run(scope: Scope): Promise<void> {
    const log = this.options.logger.child({
      informer: this.options.type.plural,
      namespace: scope.namespace ?? '*',
    });
    const first = this.options.retryMs ?? 250;
    let pause = first;
    let resourceVersion: string | undefined;
    while (!this.stopped) {
      try {
        if (resourceVersion === undefined) resourceVersion = await this.relist(scope);
        pause = first;
        resourceVersion = await this.watchOnce(scope, resourceVersion);
      } catch (thrown) {
        if (this.stopped) return;
        resourceVersion = undefined;
        if (thrown instanceof GoneError || isStatus(thrown, 410)) {
          log.debug('watch expired; re-listing');
          continue;
        }
        if (scope.connected)
          log.warn({ err: asError(thrown).message }, 'watch lost; keeping the last known objects');
        scope.connected = false;
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 5000);
      }
    }
  }

  private async relist(scope: Scope): Promise<string | undefined> {
    const { http, type, selector } = this.options;
    const items: KubeObject[] = [];
    let token: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await http.request<KubeList<KubeObject>>('GET', collectionPath(type, scope.namespace), {
        query: { labelSelector: selector, limit: 500, continue: token },
      });
      items.push(...(page.items ?? []));
      token = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (token);
    const present = new Set<string>();
    for (const item of items) {
      const key = keyOf(item.metadata.namespace, item.metadata.name);
      present.add(key);
      this.put(key, item);
    }
    // Whatever went away while nobody watched.
    for (const [key, object] of this.objects) {
      if (present.has(key)) continue;
      if (scope.namespace !== undefined && object.metadata.namespace !== scope.namespace) continue;
      this.objects.delete(key);
      this.options.onChange?.(object, true);
    }
    scope.listed = true;
    scope.connected = true;
    if (this.synced()) for (const wake of this.syncWaiters) wake();
    return resourceVersion;
  }

  private put(key: string, object: KubeObject): void {
    const previous = this.objects.get(key);
    if (previous && previous.metadata.resourceVersion === object.metadata.resourceVersion) return;
    const kept = this.options.keepManagedFields ? object : trimmed(object);
    this.objects.set(key, kept);
    this.options.onChange?.(kept, false);
  }

  /** Watches until the server ends the stream; resolves the last resourceVersion seen. */
  private async watchOnce(scope: Scope, resourceVersion: string | undefined): Promise<string | undefined> {
    let last = resourceVersion;
    let gone = false;
    const abort = new AbortController();
    scope.abort = abort;
    if (this.stopped) abort.abort();
    await watchCollection(
      this.options.http,
      collectionPath(this.options.type, scope.namespace),
      { resourceVersion, allowWatchBookmarks: true, labelSelector: this.options.selector },
      (phase, object) => {
        if (phase === 'ERROR') {
          if ((object as unknown as { code?: number }).code === 410) gone = true;
          return;
        }
        if (object?.metadata?.resourceVersion) last = object.metadata.resourceVersion;
        if (phase === 'BOOKMARK') return;
        const key = keyOf(object.metadata.namespace, object.metadata.name);
        if (phase === 'DELETED') {
          if (this.objects.delete(key)) this.options.onChange?.(object, true);
          return;
        }
        this.put(key, object);
      },
      abort.signal,
    );
    if (gone) throw new GoneError('watch expired (410 Gone)');
    return last;
  }
}
