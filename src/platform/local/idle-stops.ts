/**
 * Scale to zero on the local platform: a revision with `idleSeconds` is stopped once it has had no
 * request in flight and no activity for that long, counted on the ActivityBoard wherever the requests
 * were proxied.
 */
import type { ActivityBoard } from '../../core/activity-board.js';
import type { SlessFunction } from '../../core/resources.js';
import type { Revision } from './revisions.js';
import type { Slot } from './slots.js';

export interface IdleStopOptions {
  board: ActivityBoard;
  idleSecondsOf(fn: SlessFunction): number | undefined;
  /** The revision has been idle long enough: it is parked and stopped. */
  park(slot: Slot, revision: Revision, idleSeconds: number): void;
}

export class IdleStops {
  private readonly options: IdleStopOptions;

  constructor(options: IdleStopOptions) {
    this.options = options;
  }

  /** Stops a scale-to-zero revision once it has been idle for `idleSeconds`. */
  schedule(slot: Slot, revision: Revision): void {
    const idleSeconds = this.options.idleSecondsOf(revision.fn);
    clearTimeout(slot.idleTimer);
    if (idleSeconds === undefined) return;
    const idleMs = idleSeconds * 1000;
    const check = () => {
      if (slot.removed || slot.current !== revision) return;
      const idleFor = Date.now() - this.options.board.lastActivityOf(revision.activitySlot);
      if (this.options.board.inflightOf(revision.activitySlot) > 0 || idleFor < idleMs) {
        slot.idleTimer = setTimeout(check, Math.max(idleMs - idleFor, 50));
        return;
      }
      this.options.park(slot, revision, idleSeconds);
    };
    slot.idleTimer = setTimeout(check, idleMs);
  }
}
