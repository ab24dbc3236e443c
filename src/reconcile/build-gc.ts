/**
 * Build history past a limit is garbage: the newest `limit` finished builds of each function stay (a
 * rollback to them needs no rebuild), and so does every build that serves, that the Function asks
 * for now (its current build key, which is also what a pinned source asks for), that a pin names, that
 * a running one-off job uses, that a branch preview of the function asks for, or that is still building. The rest goes, and all of a deleted
 * function's history goes. The platform lists and removes; the choice is made here, the same for both.
 */

import type { Logger } from 'pino';
import { asError } from '../core/errors.js';
import type {
  BuildArchive,
  EventRecorder,
  FunctionRef,
  ObjectStore,
  StoredBuild,
} from '../core/interfaces.js';
import { objectKey, splitObjectKey } from '../core/object-key.js';
import { LABEL_PREVIEW_OF } from '../core/previews.js';
import {
  ANNOTATION_BUILD_KEY,
  type FunctionJob,
  type GitSource,
  LABEL_SOURCE,
  pinnedCommitOf,
  type SlessFunction,
} from '../core/resources.js';
import { Reason } from '../core/status.js';

/** What a Function and its surroundings ask to keep, beyond the newest builds. */
export interface KeepRules {
  /** Build keys in use: the Function's current one, a running job's. */
  buildKeys: ReadonlySet<string>;
  /** Commits a pin names: the build made at that commit stays. */
  commits: ReadonlySet<string>;
}

/**
 * The builds of one function to remove. `rules` is undefined when the Function no longer exists: then
 * its whole history goes, except what still runs or serves.
 */
export function selectPrunable(
  builds: readonly StoredBuild[],
  limit: number,
  rules: KeepRules | undefined,
): StoredBuild[] {
  const finished = builds
    .filter((b) => !b.running)
    .sort((a, b) => (b.finishedAt ?? '').localeCompare(a.finishedAt ?? '') || b.id.localeCompare(a.id));
  const newest = rules ? new Set(finished.slice(0, limit)) : new Set<StoredBuild>();
  return finished.filter((b) => !newest.has(b) && !inUse(b, rules));
}

/** Serving, asked for by the Function or a running job, or pinned: kept whatever the limit. */
function inUse(build: StoredBuild, rules: KeepRules | undefined): boolean {
  return (
    build.serving ||
    rules?.buildKeys.has(build.buildKey) === true ||
    (build.commit !== undefined && rules?.commits.has(build.commit) === true)
  );
}

export interface BuildCollectorOptions {
  store: ObjectStore;
  archive: BuildArchive;
  /** Finished builds kept per function besides those in use (`SLESS_BUILD_HISTORY`). */
  limit: number;
  logger: Logger;
  events?: EventRecorder;
  /**
   * Whether this replica collects now. Garbage collection is a leader's job: two replicas pruning the
   * same history would race each other. Default: always (one replica, or local mode).
   */
  shouldRun?: () => boolean;
  /** A pass on this period even when nothing asked for one (default 10 min). */
  intervalMs?: number;
  /** How long a requested pass waits, so that a commit's many reconciles cost one pass (default 1 s). */
  delayMs?: number;
}

export interface CollectResult {
  /** False when `shouldRun` said no: nothing was looked at. */
  ran: boolean;
  pruned: StoredBuild[];
}

const key = (namespace: string, name: string) => objectKey(namespace, name);

/**
 * Runs garbage collection in the background, one pass at a time: after reconciles (`request`), on a
 * timer, and when asked (`collect`). A pass never blocks a reconcile or a request; a pass that fails
 * is logged and the next one tries again.
 */
export class BuildCollector {
  private readonly options: BuildCollectorOptions;
  private running: Promise<CollectResult> | undefined;
  private delay: NodeJS.Timeout | undefined;
  /** What the pass waiting in `delay` looks at: everything, or these functions. */
  private scope: 'all' | Map<string, FunctionRef> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: BuildCollectorOptions) {
    this.options = options;
  }

  start(): void {
    this.timer = setInterval(() => this.request(0), this.options.intervalMs ?? 600_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.delay);
    await this.running?.catch(() => undefined);
  }

  /**
   * Asks for a pass soon; requests made meanwhile share it. With `fn`, the pass looks only at that
   * function's builds (what one reconcile or build can have changed), so a commit that touches one
   * function of a thousand reads one function's history, not all of them; a pass over everything
   * still runs on the timer and when asked without `fn`.
   */
  request(delayMs = this.options.delayMs ?? 1000, fn?: FunctionRef): void {
    if (this.stopped) return;
    if (!fn) this.scope = 'all';
    else if (this.scope !== 'all') {
      const functions = this.scope ?? new Map<string, FunctionRef>();
      functions.set(key(fn.namespace, fn.name), fn);
      this.scope = functions;
    }
    if (this.delay) return;
    this.delay = setTimeout(() => {
      this.delay = undefined;
      const scope = this.scope;
      this.scope = undefined;
      this.collect(scope === 'all' ? undefined : [...(scope?.values() ?? [])]).catch((error: unknown) =>
        this.options.logger.warn({ err: asError(error).message }, 'build garbage collection failed'),
      );
    }, delayMs);
    this.delay.unref();
  }

  /** One pass now (over everything, or over the builds of `functions`), after the one running (if any). */
  collect(functions?: readonly FunctionRef[]): Promise<CollectResult> {
    const previous = this.running ?? Promise.resolve(undefined);
    const next = previous.catch(() => undefined).then(() => this.pass(functions));
    this.running = next;
    void next
      .finally(() => {
        if (this.running === next) this.running = undefined;
      })
      .catch(() => undefined);
    return next;
  }

  private async pass(functions: readonly FunctionRef[] | undefined): Promise<CollectResult> {
    if (this.stopped || !(this.options.shouldRun?.() ?? true)) return { ran: false, pruned: [] };
    const { archive, limit, logger } = this.options;
    const builds = functions
      ? (await Promise.all(functions.map((fn) => archive.list(fn)))).flat()
      : await archive.list();
    const byFunction = new Map<string, StoredBuild[]>();
    for (const build of builds) {
      const k = key(build.namespace, build.name);
      byFunction.set(k, [...(byFunction.get(k) ?? []), build]);
    }
    const { rules, settled } = await this.keepRules(new Set(byFunction.keys()), functions !== undefined);
    let everything: StoredBuild[] | undefined = functions ? undefined : builds;
    const pruned: StoredBuild[] = [];
    for (const [fnKey, history] of [...byFunction].sort(([a], [b]) => a.localeCompare(b))) {
      // No Function may mean deleted, or not applied yet: after a state file was set aside, the store
      // fills again only when the sources sync. Until then, a namespace's builds are all kept.
      if (!rules.has(fnKey) && !settled.has(history[0]?.namespace ?? '')) continue;
      const prunable = selectPrunable(history, limit, rules.get(fnKey));
      if (prunable.length === 0) continue;
      // What a removal must not take can belong to another function's kept build (an image digest, a
      // code verdict shared by identical code): a scoped pass reads every build before it removes one.
      everything ??= await archive.list();
      const gone = new Set(prunable.map((b) => b.id));
      const keep = everything.filter((b) => !gone.has(b.id));
      const removed: StoredBuild[] = [];
      for (const build of prunable) {
        try {
          await archive.remove(build, keep);
          removed.push(build);
        } catch (error) {
          logger.warn({ build: build.id, err: asError(error).message }, 'could not remove a build');
        }
      }
      pruned.push(...removed);
      if (removed.length > 0) await this.report(fnKey, removed, rules.has(fnKey));
    }
    return { ran: true, pruned };
  }

  /**
   * Keep rules per existing function, and the namespaces whose store is settled: every GitSource there
   * has synced, so a function missing from the store there was deleted.
   */
  private async keepRules(
    functions: ReadonlySet<string>,
    few: boolean,
  ): Promise<{ rules: Map<string, KeepRules>; settled: Set<string> }> {
    const { store } = this.options;
    const rules = new Map<string, { buildKeys: Set<string>; commits: Set<string> }>();
    const pins = new Map<string, string>();
    const settled = new Set<string>();
    const unsettled = new Set<string>();
    for (const source of (await store.list('GitSource')) as GitSource[]) {
      const pin = pinnedCommitOf(source);
      if (pin) pins.set(key(source.metadata.namespace, source.metadata.name), pin);
      (source.status?.lastSyncedCommit ? settled : unsettled).add(source.metadata.namespace);
    }
    for (const namespace of unsettled) settled.delete(namespace);
    // A few functions are read one by one; a pass over everything lists them once.
    const wanted = few
      ? (
          await Promise.all(
            [...functions].map((k) => {
              const { namespace, name } = splitObjectKey(k);
              return store.get('Function', namespace, name);
            }),
          )
        ).filter((fn) => fn !== undefined)
      : await store.list('Function');
    for (const fn of wanted as SlessFunction[]) {
      const k = key(fn.metadata.namespace, fn.metadata.name);
      if (!functions.has(k)) continue;
      const buildKeys = new Set<string>();
      const current = fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
      if (current) buildKeys.add(current);
      if (fn.status?.buildKey) buildKeys.add(fn.status.buildKey);
      const source = fn.metadata.labels?.[LABEL_SOURCE];
      const pin = source ? pins.get(key(fn.metadata.namespace, source)) : undefined;
      rules.set(k, { buildKeys, commits: new Set(pin ? [pin] : []) });
    }
    // A branch preview's builds are kept under its main Function's name: what the preview asks for is
    // kept there, as the Function's own current build is.
    const previews = few
      ? (
          await Promise.all(
            [...functions].map((k) => {
              const { namespace, name } = splitObjectKey(k);
              return store.list('Function', { namespace, labels: { [LABEL_PREVIEW_OF]: name } });
            }),
          )
        ).flat()
      : wanted;
    for (const preview of previews as SlessFunction[]) {
      const of = preview.metadata.labels?.[LABEL_PREVIEW_OF];
      const kept = of ? rules.get(key(preview.metadata.namespace, of))?.buildKeys : undefined;
      const current = preview.metadata.annotations?.[ANNOTATION_BUILD_KEY];
      if (kept && current) kept.add(current);
      if (kept && preview.status?.buildKey) kept.add(preview.status.buildKey);
    }
    const namespaces = few
      ? [...new Set([...functions].map((k) => splitObjectKey(k).namespace))]
      : [undefined];
    const jobs = (
      await Promise.all(
        namespaces.map((namespace) => store.list('FunctionJob', namespace ? { namespace } : {})),
      )
    ).flat();
    for (const job of jobs as FunctionJob[]) {
      const phase = job.status?.phase;
      if (phase !== 'Running' && phase !== 'Pending') continue;
      const buildKey = job.status?.buildKey;
      if (buildKey) rules.get(key(job.metadata.namespace, job.spec.function))?.buildKeys.add(buildKey);
    }
    return { rules, settled };
  }

  private async report(fnKey: string, removed: StoredBuild[], exists: boolean): Promise<void> {
    const { namespace, name } = splitObjectKey(fnKey);
    const keys = removed.map((b) => b.buildKey.slice(0, 12)).join(', ');
    this.options.logger.info(
      { function: fnKey, pruned: removed.map((b) => b.id), limit: this.options.limit },
      exists ? 'pruned builds past the history limit' : 'pruned the builds of a deleted function',
    );
    if (!exists || !this.options.events) return;
    const fn = await this.options.store.get('Function', namespace, name);
    if (fn)
      this.options.events.record(
        fn,
        'Normal',
        Reason.HistoryPruned,
        `removed ${removed.length} build(s) past the history limit of ${this.options.limit}: ${keys}`,
      );
  }
}
