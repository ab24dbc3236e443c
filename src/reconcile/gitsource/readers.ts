/**
 * The open reader of each GitSource, and what wakes its syncs: the poll at its interval and, for a
 * repository on this machine, a watch of its refs. This is the port the reconcilers are handed for
 * source contents: the GitSource reconciler opens and closes readers here, syncs read through them,
 * and the Function reconciler takes a commit's snapshot from here, never from the controller.
 */
import { BoundedCache } from '../../core/bounded-cache.js';
import { parseDuration } from '../../core/duration.js';
import { asError } from '../../core/errors.js';
import type {
  ObjectStore,
  SourceReader,
  SourceReaderFactory,
  SourceSnapshot,
} from '../../core/interfaces.js';
import { ANNOTATION_PREVIEW_BRANCH } from '../../core/previews.js';
import { ANNOTATION_COMMIT, type GitSource, LABEL_SOURCE, type SlessFunction } from '../../core/resources.js';
import { loadManifests, type ParsedManifestCache } from '../../manifest/load.js';
import type { RepoSecrets } from '../../secrets/repo-secrets.js';
import { refKey } from '../runtime/object-ref.js';

/** How long closing every reader waits for a git fetch in flight to finish writing into its cache. */
const STOP_WAIT_MS = 10_000;

/** Several ref files change per commit; one wake covers them all. */
const REF_WATCH_DEBOUNCE_MS = 15;

interface Handle {
  reader: SourceReader;
  /** What the reader was opened for: a change of any of it opens a new one. */
  identity: string;
  timer?: NodeJS.Timeout;
  unwatch?: () => void;
  debounce?: NodeJS.Timeout;
}

export interface SourceReadersOptions {
  factory: SourceReaderFactory;
  store: ObjectStore;
  parsedManifests: ParsedManifestCache;
  /** A poll tick or a ref change of the source: it should sync. */
  wake: (namespace: string, name: string) => void;
  /** Finds a repository's SOPS files, which builds leave out as they leave out manifests. */
  repoSecrets?: RepoSecrets;
}

export class SourceReaders {
  private readonly options: SourceReadersOptions;
  private readonly handles = new Map<string, Handle>();
  private readonly opening = new Map<string, Promise<unknown>>();
  /**
   * Each synced commit's manifest files, per source, for the builds it starts; a promise, so builds
   * that start together read them once. Bounded: a source that syncs for months must not keep every
   * commit it ever saw (a miss reads them again).
   */
  private readonly manifestFiles = new BoundedCache<string, Promise<ReadonlySet<string>>>(64);

  constructor(options: SourceReadersOptions) {
    this.options = options;
  }

  /** The source's open reader, if it has one. */
  get(namespace: string, name: string): SourceReader | undefined {
    return this.handles.get(refKey({ namespace, name }))?.reader;
  }

  /**
   * Opens (or re-opens, when its URL, branch or secret changed) the source's reader and (re)arms its
   * poll. Callers that ask at once take turns, or two readers would share one cache directory and the
   * loser's poll timer would run on forever. Rejects with the reader factory's typed error.
   */
  open(source: GitSource): Promise<SourceReader> {
    const key = refKey(source.metadata);
    const previous = this.opening.get(key) ?? Promise.resolve();
    const next = previous.then(
      () => this.openOnce(key, source),
      () => this.openOnce(key, source),
    );
    const settled = next.catch(() => undefined);
    this.opening.set(key, settled);
    void settled.then(() => {
      if (this.opening.get(key) === settled) this.opening.delete(key);
    });
    return next;
  }

  private async openOnce(key: string, source: GitSource): Promise<SourceReader> {
    const { namespace, name } = source.metadata;
    const identity = JSON.stringify([source.spec.url, source.spec.branch, source.spec.secretRef?.name]);
    let handle = this.handles.get(key);
    if (!handle || handle.identity !== identity) {
      if (handle) void close(handle);
      const reader = await this.options.factory.create(source).catch((thrown: unknown) => {
        throw asError(thrown);
      });
      const opened: Handle = { reader, identity };
      handle = opened;
      this.handles.set(key, opened);
      opened.unwatch = reader.watch?.(() => {
        clearTimeout(opened.debounce);
        opened.debounce = setTimeout(() => this.options.wake(namespace, name), REF_WATCH_DEBOUNCE_MS);
      });
    }
    clearInterval(handle.timer);
    handle.timer = setInterval(
      () => this.options.wake(namespace, name),
      parseDuration(source.spec.interval ?? '1m'),
    );
    handle.timer.unref();
    return handle.reader;
  }

  /** Closes the source's reader and stops its poll (the source was deleted). */
  close(namespace: string, name: string): void {
    const key = refKey({ namespace, name });
    const handle = this.handles.get(key);
    this.handles.delete(key);
    if (handle) void close(handle);
  }

  /**
   * Closes every reader. A fetch in flight still writes into the source cache; the next owner of that
   * directory (a restart in the same process, or whoever removes it) must not find it half-written.
   * Bounded: a hung git server must not hold a shutdown.
   */
  async closeAll(): Promise<void> {
    const closing = [...this.handles.values()].map(close);
    this.handles.clear();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(closing),
      new Promise((resolve) => {
        timer = setTimeout(resolve, STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  /** A sync planned `commit` of the source: its builds need not read the manifest files again. */
  rememberManifestFiles(namespace: string, name: string, commit: string, files: ReadonlySet<string>): void {
    this.manifestFiles.set(`${refKey({ namespace, name })}@${commit}`, Promise.resolve(files));
  }

  /** The snapshot of the function's source at the function's commit, and the manifest files to leave out of its build. */
  async snapshotFor(
    fn: SlessFunction,
  ): Promise<{ snapshot: SourceSnapshot; manifestFiles: ReadonlySet<string> }> {
    const sourceName = fn.metadata.labels?.[LABEL_SOURCE];
    const commit = fn.metadata.annotations?.[ANNOTATION_COMMIT];
    const { namespace } = fn.metadata;
    const reader = sourceName ? this.get(namespace, sourceName) : undefined;
    if (!reader || !commit)
      throw new Error(`source "${sourceName ?? ''}" of function ${fn.metadata.name} is not available`);
    // A preview's commit is on its own branch, which a remote reader fetches by name.
    const branch = fn.metadata.annotations?.[ANNOTATION_PREVIEW_BRANCH];
    const snapshot = await (branch ? reader.snapshot(commit, branch) : reader.snapshot(commit));
    const cacheKey = `${refKey({ namespace, name: sourceName as string })}@${commit}`;
    let files = this.manifestFiles.get(cacheKey);
    if (!files) {
      files = (async () => {
        const source = await this.options.store.get('GitSource', namespace, sourceName as string);
        const { manifestFiles } = await loadManifests(snapshot, {
          root: source?.spec.path ?? '.',
          namespace,
          cache: this.options.parsedManifests,
        });
        // As the sync's plan left them out: the same files, so the same build key and context.
        if (source && this.options.repoSecrets)
          for (const file of await this.options.repoSecrets.sopsFiles(snapshot, source))
            manifestFiles.add(file);
        return manifestFiles;
      })();
      this.manifestFiles.set(cacheKey, files);
      files.catch(() => this.manifestFiles.delete(cacheKey));
    }
    return { snapshot, manifestFiles: await files };
  }
}

function close(handle: Handle): Promise<void> {
  clearInterval(handle.timer);
  clearTimeout(handle.debounce);
  handle.unwatch?.();
  return handle.reader.close?.() ?? Promise.resolve();
}
