/**
 * Routing on the local platform: what answers a `/fn/` request for a function (its serving revision,
 * a canary's share, the least busy instance, a kept build called by commit, a branch preview, or why
 * none can), and what
 * the gateway thread's route mirror is told after each change, so that it answers the same way.
 */

import type { ActivityBoard } from '../../core/activity-board.js';
import type { ObjectStore, RouteMirror, RouteState } from '../../core/interfaces.js';
import { objectKey, splitObjectKey } from '../../core/object-key.js';
import { isPreviewOf, noPreviewMessage, previewFunctionName } from '../../core/previews.js';
import { commitMatches, parseFunctionSegment } from '../../core/revision-ref.js';
import type { CommitRevisions } from './commit-revisions.js';
import { disabled, restartingAfterCrash, type Slot } from './slots.js';

export interface RoutesOptions {
  /** Every function's slot, as the platform keeps it; read here, never changed. */
  slots: ReadonlyMap<string, Slot>;
  board: ActivityBoard;
  /** What routing reads of the platform's options. */
  options: { store: ObjectStore; mirror?: RouteMirror };
  /** Kept builds called by commit. */
  commits: Pick<CommitRevisions, 'resolve'>;
  /** Starts a scale-to-zero function's parked revision; a request waits for it. */
  wake(key: string, slot: Slot): Promise<void>;
}

export class Routes {
  private readonly options: RoutesOptions['options'];
  private readonly slots: ReadonlyMap<string, Slot>;
  private readonly board: ActivityBoard;
  private readonly commits: Pick<CommitRevisions, 'resolve'>;
  private readonly wake: (key: string, slot: Slot) => Promise<void>;

  constructor(deps: RoutesOptions) {
    this.options = deps.options;
    this.slots = deps.slots;
    this.board = deps.board;
    this.commits = deps.commits;
    this.wake = deps.wake;
  }

  /**
   * Tells the mirror what serves `key` now. Called after every change of a slot's current revision,
   * its enabled flag or its process's life; the mirror skips what it already has.
   */
  mirrorRoute(key: string): void {
    const mirror = this.options.mirror;
    if (!mirror) return;
    const slot = this.slots.get(key);
    const { namespace, name } = splitObjectKey(key);
    const revision = slot?.current;
    // The same answers, in the same order, as `resolve` gives.
    if (!slot || slot.removed) mirror.publish(key, undefined);
    else if (!slot.enabled) mirror.publish(key, disabled(namespace, name));
    // Parked or still starting: only the platform can wake it or wait for it.
    else if (!revision) mirror.publish(key, undefined);
    // A split between revisions or instances is the main thread's to make, request by request. Scaling
    // out counts as split from the decision on, so no request takes a stale direct route to the first
    // instance once the new ones are ready.
    else if (slot.canary || slot.extras?.length || (slot.desiredInstances ?? 1) > 1)
      mirror.publish(key, undefined);
    else if (!revision.process.alive) mirror.publish(key, restartingAfterCrash(namespace, name));
    else {
      const { origin, socketPath, timeoutSec, admission } = revision.route;
      mirror.publish(key, {
        state: 'ready',
        origin,
        ...(socketPath ? { socketPath } : {}),
        timeoutSec,
        ...(admission ? { admission } : {}),
        activitySlot: revision.activitySlot,
      });
    }
  }

  async resolve(namespace: string, segment: string): Promise<RouteState> {
    const { name, ref } = parseFunctionSegment(segment) ?? { name: segment };
    if (ref?.kind === 'commit') return this.resolveCommit(namespace, name, ref.commit);
    if (ref) return this.resolvePreview(namespace, name, ref.label);
    const slot = this.slots.get(objectKey(namespace, name));
    if (!slot) {
      const fn = await this.options.store.get('Function', namespace, name);
      return fn
        ? { state: 'unavailable', status: 503, message: `function ${namespace}/${name} is not ready yet` }
        : { state: 'unknown' };
    }
    if (!slot.enabled) return disabled(namespace, name);
    // Scaled to zero: the request waits while the process starts, then is served. A rollout may park
    // a newer revision while an older one wakes; then the newer one is started.
    while (!slot.current && slot.parked && !slot.removed) {
      slot.waking ??= this.wake(objectKey(namespace, name), slot).finally(() => {
        slot.waking = undefined;
      });
      try {
        await slot.waking;
      } catch (error) {
        return {
          state: 'unavailable',
          status: 502,
          message: `function ${namespace}/${name} failed to start: ${(error as Error).message}`,
        };
      }
    }
    const revision = slot.current;
    if (!revision?.process.alive) return restartingAfterCrash(namespace, name);
    const canary = slot.canary;
    if (canary?.revision.process.alive && canary.takesNext()) {
      this.board.begin(canary.revision.activitySlot);
      return canary.route;
    }
    // Several instances: the one with the fewest requests in flight takes this one.
    let chosen = revision;
    for (const extra of slot.extras ?? [])
      if (
        extra.process.alive &&
        this.board.inflightOf(extra.activitySlot) < this.board.inflightOf(chosen.activitySlot)
      )
        chosen = extra;
    this.board.begin(chosen.activitySlot);
    return chosen.route;
  }

  /** A branch preview: its own Function object, served as any other (woken from zero when idle). */
  private async resolvePreview(namespace: string, name: string, label: string): Promise<RouteState> {
    const target = previewFunctionName(name, label);
    if (isPreviewOf(await this.options.store.get('Function', namespace, target), name, label))
      return this.resolve(namespace, target);
    return (await this.options.store.get('Function', namespace, name))
      ? { state: 'unavailable', status: 404, message: noPreviewMessage(namespace, name, label) }
      : { state: 'unknown' };
  }

  /**
   * A commit's kept build: the serving revision itself when that is the build asked for (no second
   * process for the same code), else a process of its own, started for the request.
   */
  private async resolveCommit(namespace: string, name: string, commit: string): Promise<RouteState> {
    const slot = this.slots.get(objectKey(namespace, name));
    // A trigger that disables the function disables every revision of it.
    if (slot && !slot.enabled) return disabled(namespace, name);
    const serving = slot?.current;
    if (serving?.process.alive && commitMatches(serving.build.commit, commit)) {
      this.board.begin(serving.activitySlot);
      return serving.route;
    }
    return this.commits.resolve(namespace, name, commit);
  }
}
