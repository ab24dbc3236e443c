/**
 * When each GitSource syncs. Syncs of one source never overlap, and at most one waits behind the
 * running one: every request made meanwhile joins it, since a sync started after a request sees
 * everything the request could have asked for. The waiting sync also starts no sooner than the
 * coalescing window after the last one started, unless it is forced, so a storm of webhooks spread
 * over seconds costs one sync per window, not one per delivery, while the first delivery to a quiet
 * source still syncs at once. A source's prune (its deletion) takes the same turn as its syncs.
 */
import type { Logger } from 'pino';
import { asError, RecordedFailure, SlessError } from '../../core/errors.js';
import type { EventRecorder, ObjectStore } from '../../core/interfaces.js';
import { type GitSource, LABEL_SOURCE } from '../../core/resources.js';
import { REPO_KINDS } from '../../core/schemas.js';
import { Reason } from '../../core/status.js';
import type { ParsedManifestCache } from '../../manifest/load.js';
import type { RepoSecrets } from '../../secrets/repo-secrets.js';
import type { BuildKeyCache } from '../plan.js';
import { refKey } from '../runtime/object-ref.js';
import { type SyncResult, syncSource } from '../source-sync.js';
import type { SourceReaders } from './readers.js';

/** Webhooks and watch events within this long of a sync's start join the next sync (default). */
export const SYNC_COALESCE_MS = 1000;

/** Per source: the sync waiting to run after the one running now, which later requests join. */
interface SyncSlot {
  pending?: Promise<SyncResult | undefined>;
  force: boolean;
  /** When the last sync of this source started (ms since the epoch); 0 before the first. */
  lastStartedAt: number;
  /** Ends the coalescing wait of the pending sync at once (a forced request, or stop()). */
  wake?: () => void;
}

export interface SourceSyncsOptions {
  store: ObjectStore;
  logger: Logger;
  readers: SourceReaders;
  parsedManifests: ParsedManifestCache;
  buildKeys: BuildKeyCache;
  maxFunctions: number;
  coalesceMs: number;
  /**
   * Opens a source that has no reader yet, as the GitSource reconciler does (so status says why it
   * cannot be opened); rejects with why.
   */
  open: (namespace: string, name: string) => Promise<unknown>;
  events?: EventRecorder;
  /** Decrypts a repository's SOPS Secret files during its sync, and drops them with its prune. */
  repoSecrets?: RepoSecrets;
  finished?: (source: GitSource, result: SyncResult, durationMs: number) => void;
}

export class SourceSyncs {
  private readonly options: SourceSyncsOptions;
  private readonly slots = new Map<string, SyncSlot>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private stopped = false;

  constructor(options: SourceSyncsOptions) {
    this.options = options;
  }

  /** Syncs one source soon (webhooks, polls, the sync endpoint); `force` syncs even an unchanged head at once. */
  syncNow(
    namespace: string,
    name: string,
    options: { force?: boolean } = {},
  ): Promise<SyncResult | undefined> {
    const key = refKey({ namespace, name });
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { force: false, lastStartedAt: 0 };
      this.slots.set(key, slot);
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

  /** Prunes everything the source applied, in its turn after any sync of it, as a Kustomization's prune does. */
  async prune(namespace: string, name: string): Promise<void> {
    const key = refKey({ namespace, name });
    this.slots.delete(key);
    await this.exclusive(key, async () => {
      for (const kind of [...REPO_KINDS].reverse()) {
        const owned = await this.options.store.list(kind, { namespace, labels: { [LABEL_SOURCE]: name } });
        for (const o of owned) await this.options.store.delete(kind, o.metadata.namespace, o.metadata.name);
      }
      await this.options.repoSecrets?.prune(namespace, name);
    });
  }

  /** No more syncs start; a sync waiting out its window starts at once and finds nothing to do. */
  stop(): void {
    this.stopped = true;
    for (const slot of this.slots.values()) slot.wake?.();
  }

  /** Waits out the rest of the slot's coalescing window; a forced request or stop() ends it early. */
  private coalesce(slot: SyncSlot): Promise<void> {
    const waitMs = slot.lastStartedAt + this.options.coalesceMs - Date.now();
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
    const source = await this.options.store.get('GitSource', namespace, name);
    if (!source || this.stopped) return undefined;
    let reader = this.options.readers.get(namespace, name);
    if (!reader) {
      // Opened as the source reconciler opens it, so status says why it cannot be; the caller of
      // the sync hears the same reason.
      const opened = await this.options.open(namespace, name).then(
        () => undefined,
        (thrown: unknown) => asError(thrown),
      );
      reader = this.options.readers.get(namespace, name);
      if (!reader) return openFailure(namespace, name, opened);
    }
    const started = Date.now();
    const result = await syncSource(
      {
        store: this.options.store,
        logger: this.options.logger,
        manifests: this.options.parsedManifests,
        buildKeys: this.options.buildKeys,
        ...(this.options.repoSecrets ? { repoSecrets: this.options.repoSecrets } : {}),
        maxFunctions: this.options.maxFunctions,
        // Known before anything is applied, so the builds the apply starts need not read them again.
        planned: (plan) =>
          this.options.readers.rememberManifestFiles(namespace, name, plan.commit, plan.manifestFiles),
      },
      source,
      reader,
      options,
    );
    this.record(source, result);
    this.options.finished?.(source, result, Date.now() - started);
    return result;
  }

  private record(source: GitSource, result: SyncResult): void {
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
}

/** A sync that could not open its source: the reason and message its status now carries. */
function openFailure(namespace: string, name: string, error: Error | undefined): SyncResult {
  const cause = error instanceof RecordedFailure && error.cause instanceof Error ? error.cause : error;
  return {
    outcome: 'failed',
    reason: cause instanceof SlessError ? cause.reason : Reason.SourceFailed,
    message: cause?.message ?? `source ${namespace}/${name} cannot be opened`,
  };
}
