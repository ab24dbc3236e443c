/**
 * Local mode's object store, standing in for the Kubernetes API server: the same apply, generation
 * and status semantics the kube platform gets, held in memory and, with persistence, on disk before
 * any change is announced, so a restart finds exactly what was reported.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { ListOptions, NamespaceRegistry, ObjectStore, StoreEvent } from '../../core/interfaces.js';
import { type AnyResource, isKind, type ResourceOf } from '../../core/resources.js';
import type { KindName } from '../../core/schemas.js';
import { JsonText, JsonTextCache } from './state-file.js';

function keyOf(kind: KindName, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** Everything the store holds, as written to and read from the state directory. */
export interface StoreSnapshot {
  objects: AnyResource[];
  namespaces: string[];
  resourceVersion: number;
}

export interface MemoryStoreOptions {
  /** What a previous run left: objects come back with their status, as they would from an API server. */
  initial?: StoreSnapshot;
  /**
   * Makes the current contents durable. Every change waits for it before anyone hears of the change,
   * so nothing acts on state that a restart would not find again. `change` is that change as JSON
   * text, which `replayStoreChanges` applies to an earlier snapshot.
   */
  persist?: (change: string) => Promise<void>;
}

/**
 * The local platform's desired state, with the semantics the Kubernetes API gives the kube platform:
 * apply replaces what the manager owns, generation moves only when spec moves, and status is written
 * separately. Callers always get copies, so nobody mutates stored state by accident. With `persist`,
 * every change is on disk before it is announced, so a restart finds what the API server would hold.
 */
export class MemoryStore implements ObjectStore, NamespaceRegistry {
  /** Stored objects are never changed in place: a change stores a new object (see `put`). */
  private readonly objects = new Map<string, AnyResource>();
  private readonly texts = new JsonTextCache();
  /** Namespaces created through ensureNamespace; `default` always exists, as in Kubernetes. */
  private readonly namespaces = new Set<string>(['default']);
  private readonly listeners = new Set<(event: StoreEvent) => void>();
  private resourceVersion = 0;
  private readonly save: (change: string) => Promise<void>;
  /** The last write asked for; once it is done, every earlier change is on disk too. */
  private durable: Promise<void> = Promise.resolve();

  constructor(options: MemoryStoreOptions = {}) {
    this.save = options.persist ?? (async () => undefined);
    const initial = options.initial;
    if (!initial) return;
    for (const object of initial.objects)
      this.objects.set(keyOf(object.kind, object.metadata.namespace, object.metadata.name), clone(object));
    for (const namespace of initial.namespaces) this.namespaces.add(namespace);
    let highest = initial.resourceVersion;
    for (const object of initial.objects)
      highest = Math.max(highest, Number(object.metadata.resourceVersion ?? 0) || 0);
    this.resourceVersion = highest;
  }

  private persist(change: string): Promise<void> {
    this.durable = this.save(change);
    return this.durable;
  }

  /** The stored object under `key` as a journaled change. */
  private putChange(key: string): string {
    const object = this.objects.get(key);
    return `{"put":${JSON.stringify(key)},"resourceVersion":${this.resourceVersion},"object":${this.texts.of(key, object)}}`;
  }

  /**
   * Reads wait for a write in flight, so nobody (the API included) sees a change that a kill -9 right
   * after could still lose: what was reported before a restart is what the restart finds.
   */
  private async settled(): Promise<void> {
    await this.durable;
  }

  /**
   * `snapshot()` as JSON text for the state directory: only objects changed since the last call are
   * serialised again, so a status change of one function among thousands costs about one object.
   */
  snapshotJson(): JsonText {
    const keys = [...this.objects.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const objects = keys.map((key) => this.texts.of(key, this.objects.get(key)));
    return new JsonText(
      `{"objects":[${objects.join(',')}],"namespaces":${JSON.stringify([...this.namespaces].sort())},"resourceVersion":${this.resourceVersion}}`,
    );
  }

  /**
   * A reader's copy, parsed from the object's JSON text: faster than a structured clone, and the text
   * is the one the next state write reuses. Stored objects hold only JSON values (they come from YAML,
   * JSON bodies or the reconcilers' plain records), so nothing is lost but keys set to undefined.
   */
  private copyOf(key: string, object: AnyResource): AnyResource {
    return JSON.parse(this.texts.of(key, object)) as AnyResource;
  }

  private put(key: string, object: AnyResource): void {
    this.objects.set(key, object);
    this.texts.forget(key);
  }

  /** A copy of everything held, sorted, for the state directory. */
  snapshot(): StoreSnapshot {
    const objects = [...this.objects.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, object]) => clone(object));
    return { objects, namespaces: [...this.namespaces].sort(), resourceVersion: this.resourceVersion };
  }

  async get<K extends KindName>(
    kind: K,
    namespace: string,
    name: string,
  ): Promise<ResourceOf<K> | undefined> {
    await this.settled();
    const key = keyOf(kind, namespace, name);
    const found = this.objects.get(key);
    // Stored under its own kind's key, so the object is of that kind.
    return found ? (this.copyOf(key, found) as ResourceOf<K>) : undefined;
  }

  async list<K extends KindName>(kind: K, options: ListOptions = {}): Promise<ResourceOf<K>[]> {
    await this.settled();
    const out: ResourceOf<K>[] = [];
    for (const [key, object] of this.objects) {
      if (!isKind(object, kind)) continue;
      if (options.namespace && object.metadata.namespace !== options.namespace) continue;
      if (options.labels && !matchesLabels(object, options.labels)) continue;
      out.push(this.copyOf(key, object) as ResourceOf<K>);
    }
    return out.sort((a, b) =>
      keyOf(a.kind, a.metadata.namespace, a.metadata.name).localeCompare(
        keyOf(b.kind, b.metadata.namespace, b.metadata.name),
      ),
    );
  }

  async apply(object: AnyResource): Promise<AnyResource> {
    const key = keyOf(object.kind, object.metadata.namespace, object.metadata.name);
    const existing = this.objects.get(key);
    if (!existing) {
      const created = clone(object) as AnyResource;
      created.metadata = {
        ...created.metadata,
        generation: 1,
        uid: randomUUID(),
        resourceVersion: String(++this.resourceVersion),
        creationTimestamp: new Date().toISOString(),
      };
      delete created.status;
      this.put(key, created);
      await this.persist(this.putChange(key));
      this.emit({ type: 'ADDED', object: created, statusOnly: false });
      return clone(created);
    }
    const specChanged = !isDeepStrictEqual(existing.spec, object.spec);
    const metaChanged =
      !isDeepStrictEqual(existing.metadata.labels ?? {}, object.metadata.labels ?? {}) ||
      !isDeepStrictEqual(existing.metadata.annotations ?? {}, object.metadata.annotations ?? {});
    if (!specChanged && !metaChanged) return clone(existing);
    const updated = {
      ...existing,
      spec: clone(object.spec),
      metadata: {
        ...existing.metadata,
        labels: clone(object.metadata.labels),
        annotations: clone(object.metadata.annotations),
        generation: (existing.metadata.generation ?? 1) + (specChanged ? 1 : 0),
        resourceVersion: String(++this.resourceVersion),
      },
    } as AnyResource;
    this.put(key, updated);
    await this.persist(this.putChange(key));
    this.emit({ type: 'MODIFIED', object: updated, statusOnly: false });
    return clone(updated);
  }

  async patchStatus(object: AnyResource, status: object): Promise<void> {
    const key = keyOf(object.kind, object.metadata.namespace, object.metadata.name);
    const existing = this.objects.get(key);
    if (!existing) return;
    const next = { ...(existing.status ?? {}), ...clone(status) };
    for (const [field, value] of Object.entries(next))
      if (value === undefined) delete (next as Record<string, unknown>)[field];
    if (isDeepStrictEqual(existing.status, next)) return;
    const updated = {
      ...existing,
      status: next,
      metadata: { ...existing.metadata, resourceVersion: String(++this.resourceVersion) },
    } as AnyResource;
    this.put(key, updated);
    await this.persist(this.putChange(key));
    this.emit({ type: 'MODIFIED', object: updated, statusOnly: true });
  }

  async delete(kind: KindName, namespace: string, name: string): Promise<boolean> {
    const key = keyOf(kind, namespace, name);
    const existing = this.objects.get(key);
    if (!existing) return false;
    this.objects.delete(key);
    this.texts.forget(key);
    await this.persist(`{"delete":${JSON.stringify(key)}}`);
    this.emit({ type: 'DELETED', object: existing, statusOnly: false });
    return true;
  }

  /** A namespace exists when it was ensured, is `default`, or holds any object. */
  async namespaceExists(namespace: string): Promise<boolean> {
    await this.settled();
    return this.namespaces.has(namespace) || this.holdsObjects(namespace);
  }

  async ensureNamespace(namespace: string): Promise<boolean> {
    // Check and record with no await in between, so of concurrent calls exactly one creates it.
    const existed = this.namespaces.has(namespace) || this.holdsObjects(namespace);
    this.namespaces.add(namespace);
    if (!existed) await this.persist(`{"namespace":${JSON.stringify(namespace)}}`);
    return !existed;
  }

  private holdsObjects(namespace: string): boolean {
    for (const object of this.objects.values()) if (object.metadata.namespace === namespace) return true;
    return false;
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: StoreEvent): void {
    const copy = { ...event, object: clone(event.object) };
    for (const listener of this.listeners) listener(copy);
  }
}

/**
 * Applies journaled store changes, in order, to a snapshot's payload as parsed (decodeStoreSnapshot
 * checks the result). Throws on a change it does not know, naming it.
 */
export function replayStoreChanges(payload: unknown, changes: unknown[]): unknown {
  const data = payload as Partial<Record<keyof StoreSnapshot, unknown>> | null;
  if (!data || !Array.isArray(data.objects) || !Array.isArray(data.namespaces))
    throw new Error('data must have "objects" and "namespaces" arrays');
  const objects = new Map<string, unknown>();
  for (const object of data.objects as AnyResource[])
    objects.set(keyOf(object?.kind, object?.metadata?.namespace, object?.metadata?.name), object);
  const namespaces = new Set(data.namespaces as unknown[]);
  let resourceVersion = typeof data.resourceVersion === 'number' ? data.resourceVersion : 0;
  for (const [index, change] of changes.entries()) {
    const entry = change as {
      put?: unknown;
      delete?: unknown;
      namespace?: unknown;
      object?: unknown;
      resourceVersion?: unknown;
    } | null;
    if (typeof entry?.put === 'string' && typeof entry.object === 'object' && entry.object !== null) {
      objects.set(entry.put, entry.object);
      if (typeof entry.resourceVersion === 'number')
        resourceVersion = Math.max(resourceVersion, entry.resourceVersion);
    } else if (typeof entry?.delete === 'string') objects.delete(entry.delete);
    else if (typeof entry?.namespace === 'string') namespaces.add(entry.namespace);
    else throw new Error(`journal change ${index + 1} is none of put, delete or namespace`);
  }
  const keys = [...objects.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    objects: keys.map((key) => objects.get(key)),
    namespaces: [...namespaces].sort(),
    resourceVersion,
  };
}

function matchesLabels(object: AnyResource, labels: Record<string, string>): boolean {
  const own = object.metadata.labels ?? {};
  return Object.entries(labels).every(([k, v]) => own[k] === v);
}
