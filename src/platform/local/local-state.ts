/**
 * What the local platform keeps in its state directory to come back after kill -9 or SIGTERM exactly
 * as it was, as the kube platform does by keeping everything in the API server:
 *
 * - `state/objects.json`: the store (GitSources with their status, so the last accepted commit and a
 *   rejected head's report; the Functions, Triggers and FunctionJobs that commit applied);
 * - `state/serving.json`: per function, the revision that serves and the build it runs;
 * - `state/failed-builds.json`: per build key, a failed build's verdict, so a restart does not try it
 *   again (a rebuild request clears it; a commit that changes the code has a new build key);
 * - `state/code-verdicts.json`: per build key, the code security gate's verdict, so no code is sent
 *   to the endpoint twice, restarts included.
 *
 * Each file is versioned and written atomically (see StateFile).
 */

import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  type CodeVerdictStore,
  decodeStoredVerdict,
  type StoredCodeVerdict,
} from '../../core/code-verdicts.js';
import { objectKey } from '../../core/object-key.js';
import type { AnyResource, BuildRecord, SlessFunction } from '../../core/resources.js';
import { KIND_NAMES } from '../../core/schemas.js';
import { replayStoreChanges, type StoreSnapshot } from './memory-store.js';
import { expectArray, expectRecord, expectString, JsonText, JsonTextCache, StateFile } from './state-file.js';

/** Bump when a file's shape changes; an older sless then sets the newer file aside instead of misreading it. */
export const STATE_VERSION = 1;

export interface ServingRecord {
  /** The Function as it was deployed (its spec decides env, memory, timeout). */
  fn: SlessFunction;
  /** The build it runs; `image` is the build directory. */
  build: BuildRecord;
  revision: string;
  enabled: boolean;
}

/**
 * The builds that must never be deleted: those serving now, and those a restart would start. A
 * garbage collector of build directories consults this before removing anything.
 */
export interface PinnedBuilds {
  pinnedBuildDirs(): ReadonlySet<string>;
}

function functionKey(fn: SlessFunction): string {
  return objectKey(fn.metadata.namespace, fn.metadata.name);
}

/** Per function (`ns/name`), the revision that serves; written before the route switches to it. */
export class ServingRecords implements PinnedBuilds {
  /** Records are replaced, never changed in place, so each one's JSON is made once. */
  private readonly records: Map<string, ServingRecord>;
  private readonly texts = new JsonTextCache();
  private readonly file: StateFile<Record<string, ServingRecord>>;

  constructor(file: StateFile<Record<string, ServingRecord>>, initial: Record<string, ServingRecord> = {}) {
    this.file = file;
    this.records = new Map(Object.entries(initial));
  }

  all(): [string, ServingRecord][] {
    return [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  get(key: string): ServingRecord | undefined {
    const record = this.records.get(key);
    return record ? structuredClone(record) : undefined;
  }

  record(record: ServingRecord): Promise<void> {
    const key = functionKey(record.fn);
    this.records.set(key, structuredClone(record));
    this.texts.forget(key);
    return this.save(`{"put":${JSON.stringify(key)},"value":${this.texts.of(key, this.records.get(key))}}`);
  }

  forget(key: string): Promise<void> {
    if (!this.records.delete(key)) return Promise.resolve();
    this.texts.forget(key);
    return this.save(`{"delete":${JSON.stringify(key)}}`);
  }

  close(): Promise<void> {
    return this.file.close();
  }

  pinnedBuildDirs(): ReadonlySet<string> {
    const dirs = new Set<string>();
    for (const record of this.records.values()) if (record.build.image) dirs.add(record.build.image);
    return dirs;
  }

  private save(change: string): Promise<void> {
    return this.file.save(() => new JsonText(this.texts.record(this.records)), change);
  }
}

/** Failed builds by `ns/name/buildKey`. */
export class FailedBuildVerdicts {
  private readonly verdicts: Map<string, BuildRecord>;
  private readonly file: StateFile<Record<string, BuildRecord>>;

  constructor(file: StateFile<Record<string, BuildRecord>>, initial: Record<string, BuildRecord> = {}) {
    this.file = file;
    this.verdicts = new Map(Object.entries(initial));
  }

  get(fn: SlessFunction, buildKey: string): BuildRecord | undefined {
    const verdict = this.verdicts.get(`${functionKey(fn)}/${buildKey}`);
    return verdict ? structuredClone(verdict) : undefined;
  }

  set(fn: SlessFunction, buildKey: string, record: BuildRecord): Promise<void> {
    this.verdicts.set(`${functionKey(fn)}/${buildKey}`, structuredClone(record));
    return this.save();
  }

  delete(fn: SlessFunction, buildKey: string): Promise<void> {
    if (!this.verdicts.delete(`${functionKey(fn)}/${buildKey}`)) return Promise.resolve();
    return this.save();
  }

  close(): Promise<void> {
    return this.file.close();
  }

  private save(): Promise<void> {
    return this.file.save(() =>
      Object.fromEntries([...this.verdicts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    );
  }
}

/** The gate's verdicts by build key; the oldest go past 10,000 (the code is then asked about again). */
export class CodeVerdicts implements CodeVerdictStore {
  static readonly LIMIT = 10_000;
  private readonly verdicts: Map<string, StoredCodeVerdict>;
  private readonly file: StateFile<Record<string, StoredCodeVerdict>>;

  constructor(
    file: StateFile<Record<string, StoredCodeVerdict>>,
    initial: Record<string, StoredCodeVerdict> = {},
  ) {
    this.file = file;
    this.verdicts = new Map(
      Object.entries(initial).sort(([, a], [, b]) => (a.finishedAt < b.finishedAt ? -1 : 1)),
    );
  }

  async get(buildKey: string): Promise<StoredCodeVerdict | undefined> {
    const verdict = this.verdicts.get(buildKey);
    return verdict ? structuredClone(verdict) : undefined;
  }

  set(buildKey: string, verdict: StoredCodeVerdict): Promise<void> {
    if (this.verdicts.has(buildKey)) return Promise.resolve();
    this.verdicts.set(buildKey, structuredClone(verdict));
    for (const oldest of this.verdicts.keys()) {
      if (this.verdicts.size <= CodeVerdicts.LIMIT) break;
      this.verdicts.delete(oldest);
    }
    return this.file.save(() =>
      Object.fromEntries([...this.verdicts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    );
  }

  close(): Promise<void> {
    return this.file.close();
  }
}

export class LocalState {
  /** The store as the last run left it; undefined on a first start (or when the file was set aside). */
  readonly storeSnapshot: StoreSnapshot | undefined;
  readonly serving: ServingRecords;
  readonly failedBuilds: FailedBuildVerdicts;
  readonly codeVerdicts: CodeVerdicts;
  private readonly storeFile: StateFile<StoreSnapshot>;

  private constructor(parts: {
    storeFile: StateFile<StoreSnapshot>;
    storeSnapshot: StoreSnapshot | undefined;
    serving: ServingRecords;
    failedBuilds: FailedBuildVerdicts;
    codeVerdicts: CodeVerdicts;
  }) {
    this.storeFile = parts.storeFile;
    this.storeSnapshot = parts.storeSnapshot;
    this.serving = parts.serving;
    this.failedBuilds = parts.failedBuilds;
    this.codeVerdicts = parts.codeVerdicts;
  }

  static async open(stateDir: string, logger: Logger): Promise<LocalState> {
    const dir = join(stateDir, 'state');
    const file = <T>(
      name: string,
      decode: (payload: unknown) => T,
      replay?: (payload: unknown, changes: unknown[]) => unknown,
    ) =>
      new StateFile<T>({
        path: join(dir, name),
        version: STATE_VERSION,
        logger,
        decode,
        ...(replay ? { replay } : {}),
      });
    // The two that change with every function's status or rollout are journaled.
    const storeFile = file('objects.json', decodeStoreSnapshot, replayStoreChanges);
    const servingFile = file('serving.json', decodeServing, replayKeyedChanges);
    const failedFile = file('failed-builds.json', decodeFailedBuilds);
    const verdictsFile = file('code-verdicts.json', decodeCodeVerdicts);
    const [storeSnapshot, serving, failed, verdicts] = await Promise.all([
      storeFile.load(),
      servingFile.load(),
      failedFile.load(),
      verdictsFile.load(),
    ]);
    return new LocalState({
      storeFile,
      storeSnapshot,
      serving: new ServingRecords(servingFile, serving),
      failedBuilds: new FailedBuildVerdicts(failedFile, failed),
      codeVerdicts: new CodeVerdicts(verdictsFile, verdicts),
    });
  }

  /** `change`: what changed, as the store journals it (see replayStoreChanges). */
  saveStore(snapshot: () => StoreSnapshot | JsonText, change?: string): Promise<void> {
    return this.storeFile.save(snapshot, change);
  }

  /** Writes what was asked for so far; later changes are not written (see StateFile.close). */
  async close(): Promise<void> {
    await Promise.all([
      this.storeFile.close(),
      this.serving.close(),
      this.failedBuilds.close(),
      this.codeVerdicts.close(),
    ]);
  }
}

function decodeResource(value: unknown, what: string): AnyResource {
  const object = expectRecord(value, what);
  const kind = expectString(object.kind, `${what}.kind`);
  if (!(KIND_NAMES as string[]).includes(kind)) throw new Error(`${what}.kind: unknown kind "${kind}"`);
  const metadata = expectRecord(object.metadata, `${what}.metadata`);
  expectString(metadata.name, `${what}.metadata.name`);
  expectString(metadata.namespace, `${what}.metadata.namespace`);
  expectRecord(object.spec, `${what}.spec`);
  return object as unknown as AnyResource;
}

function decodeBuildRecord(value: unknown, what: string): BuildRecord {
  const record = expectRecord(value, what);
  expectString(record.buildKey, `${what}.buildKey`);
  expectString(record.commit, `${what}.commit`);
  expectString(record.result, `${what}.result`);
  return record as unknown as BuildRecord;
}

export function decodeStoreSnapshot(payload: unknown): StoreSnapshot {
  const data = expectRecord(payload, 'data');
  const objects = expectArray(data.objects, 'data.objects').map((o, i) =>
    decodeResource(o, `data.objects[${i}]`),
  );
  const namespaces = expectArray(data.namespaces, 'data.namespaces').map((n, i) =>
    expectString(n, `data.namespaces[${i}]`),
  );
  const resourceVersion = data.resourceVersion;
  if (typeof resourceVersion !== 'number') throw new Error('data.resourceVersion must be a number');
  return { objects, namespaces, resourceVersion };
}

/** Applies journaled `{put, value}` and `{delete}` changes, in order, to a keyed record as parsed. */
export function replayKeyedChanges(payload: unknown, changes: unknown[]): unknown {
  const data = new Map(Object.entries(expectRecord(payload, 'data')));
  for (const [index, change] of changes.entries()) {
    const entry = change as { put?: unknown; value?: unknown; delete?: unknown } | null;
    if (typeof entry?.put === 'string' && 'value' in entry) data.set(entry.put, entry.value);
    else if (typeof entry?.delete === 'string') data.delete(entry.delete);
    else throw new Error(`journal change ${index + 1} is neither put nor delete`);
  }
  return Object.fromEntries([...data].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export function decodeServing(payload: unknown): Record<string, ServingRecord> {
  const data = expectRecord(payload, 'data');
  const out: Record<string, ServingRecord> = {};
  for (const [key, value] of Object.entries(data)) {
    const record = expectRecord(value, `data["${key}"]`);
    const fn = decodeResource(record.fn, `data["${key}"].fn`);
    if (fn.kind !== 'Function') throw new Error(`data["${key}"].fn must be a Function`);
    const build = decodeBuildRecord(record.build, `data["${key}"].build`);
    expectString(build.image, `data["${key}"].build.image`);
    expectString(record.revision, `data["${key}"].revision`);
    if (typeof record.enabled !== 'boolean') throw new Error(`data["${key}"].enabled must be a boolean`);
    out[key] = record as unknown as ServingRecord;
  }
  return out;
}

export function decodeFailedBuilds(payload: unknown): Record<string, BuildRecord> {
  const data = expectRecord(payload, 'data');
  const out: Record<string, BuildRecord> = {};
  for (const [key, value] of Object.entries(data)) out[key] = decodeBuildRecord(value, `data["${key}"]`);
  return out;
}

export function decodeCodeVerdicts(payload: unknown): Record<string, StoredCodeVerdict> {
  const data = expectRecord(payload, 'data');
  const out: Record<string, StoredCodeVerdict> = {};
  for (const [key, value] of Object.entries(data)) out[key] = decodeStoredVerdict(value, `data["${key}"]`);
  return out;
}
