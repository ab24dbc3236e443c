/**
 * Scale-out on the local platform: the instances of a function's serving revision beyond the first,
 * which the autoscaler asks for under load. It says which functions may scale, starts instances
 * beside the first (after the gateway thread has handed the function's requests to the main thread,
 * which balances them), and stops those past the count once their requests have answered.
 */
import type { Logger } from 'pino';
import type { ActivityBoard } from '../../core/activity-board.js';
import { asError } from '../../core/errors.js';
import type { RouteMirror } from '../../core/interfaces.js';
import type { ScalableFunction } from './local-autoscaler.js';
import type { Revision, RevisionStarter } from './revisions.js';
import type { Slot } from './slots.js';

export interface ScaleOutOptions {
  /** Every function's slot, as the platform keeps it; scale-out changes only its instances. */
  slots: ReadonlyMap<string, Slot>;
  board: ActivityBoard;
  /** What scale-out reads of the platform's options. */
  options: {
    logger: Logger;
    mirror?: RouteMirror;
    onChanged?: (namespace: string, name: string) => void;
  };
  revisions: Pick<RevisionStarter, 'start'>;
  /** Tells the gateway thread's mirror what serves `key` now. */
  mirrorRoute(key: string): void;
  /** Drains a revision's requests, then stops it. */
  retire(revision: Revision): Promise<void>;
  /** The same, without holding up the caller; stopping the platform waits for it. */
  retireInBackground(revision: Revision): void;
}

export class ScaleOut {
  private readonly options: ScaleOutOptions['options'];
  private readonly slots: ReadonlyMap<string, Slot>;
  private readonly board: ActivityBoard;
  private readonly revisions: Pick<RevisionStarter, 'start'>;
  private readonly mirrorRoute: (key: string) => void;
  private readonly retire: (revision: Revision) => Promise<void>;
  private readonly retireInBackground: (revision: Revision) => void;

  constructor(deps: ScaleOutOptions) {
    this.options = deps.options;
    this.slots = deps.slots;
    this.board = deps.board;
    this.revisions = deps.revisions;
    this.mirrorRoute = deps.mirrorRoute;
    this.retire = deps.retire;
    this.retireInBackground = deps.retireInBackground;
  }

  /** Functions the autoscaler may scale now: with `spec.scale`, serving, and no canary deciding. */
  scalable(): ScalableFunction[] {
    const out: ScalableFunction[] = [];
    for (const [key, slot] of this.slots) {
      const current = slot.current;
      if (!current?.process.alive || !slot.enabled || slot.removed || slot.canary) continue;
      if (!current.fn.spec.scale) continue;
      const instances = [current, ...(slot.extras ?? [])];
      let inflight = 0;
      for (const instance of instances) inflight += this.board.inflightOf(instance.activitySlot);
      out.push({ key, fn: current.fn, inflight, instances: instances.length });
    }
    return out;
  }

  /**
   * Runs `instances` processes of the serving revision, each in its own sandbox with its own memory
   * limit: more are started beside it, and those past the count stop once their requests finished.
   */
  async scaleTo(key: string, instances: number): Promise<void> {
    const slot = this.slots.get(key);
    const current = slot?.current;
    if (!slot || !current) return;
    const extras = slot.extras ?? [];
    const wanted = Math.max(instances, 1) - 1;
    slot.desiredInstances = wanted + 1;
    if (wanted > extras.length) {
      // The proxy thread hands this function's requests over before any new instance counts as ready.
      this.mirrorRoute(key);
      await this.options.mirror?.synced();
      const started = await Promise.allSettled(
        Array.from({ length: wanted - extras.length }, () =>
          this.revisions.start(current.fn, current.build, current.id),
        ),
      );
      for (const result of started) {
        if (result.status === 'rejected') {
          this.options.logger.warn(
            { function: key, err: asError(result.reason).message },
            'an instance did not start',
          );
          continue;
        }
        const instance = result.value;
        // The revision changed or the function went while it started: it is not needed.
        if (slot.removed || slot.current !== current || slot.canary) {
          void instance.process.stop();
          continue;
        }
        slot.extras = [...(slot.extras ?? []), instance];
        // An extra instance that exits is not restarted: the next decision starts another if needed.
        instance.process.once('exit', () => {
          if (slot.extras?.includes(instance)) {
            slot.extras = slot.extras.filter((r) => r !== instance);
            this.mirrorRoute(key);
          }
        });
      }
      // With more than one instance the main thread balances: the proxy thread hands requests over.
      this.mirrorRoute(key);
    } else if (wanted < extras.length) {
      // The least busy go first; each drains before it stops.
      const byLoad = [...extras].sort(
        (a, b) => this.board.inflightOf(a.activitySlot) - this.board.inflightOf(b.activitySlot),
      );
      const leaving = new Set(byLoad.slice(0, extras.length - wanted));
      slot.extras = extras.filter((r) => !leaving.has(r));
      this.mirrorRoute(key);
      for (const instance of leaving) this.retireInBackground(instance);
    }
    const { namespace, name } = current.fn.metadata;
    this.options.onChanged?.(namespace, name);
  }

  /** Stops every extra instance, after its requests finished. */
  async retireExtras(key: string, slot: Slot): Promise<void> {
    const extras = slot.extras ?? [];
    slot.extras = undefined;
    slot.desiredInstances = undefined;
    if (extras.length === 0) return;
    this.mirrorRoute(key);
    await Promise.all(extras.map((r) => this.retire(r)));
  }
}
