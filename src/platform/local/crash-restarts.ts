/**
 * Restarting a function whose process crashed: the same build again, after a backoff that doubles per
 * crash up to 30 s and starts over once a revision ran for a minute, as a kubelet restarts a pod.
 */
import type { Logger } from 'pino';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import type { Revision } from './revisions.js';
import type { Slot } from './slots.js';

export interface CrashRestartOptions {
  logger: Logger;
  start(fn: SlessFunction, build: BuildRecord, id: string): Promise<Revision>;
  /** The serving revision crashed: its route is withdrawn and status told, before the restart waits. */
  crashed(key: string, slot: Slot, revision: Revision, message: string): void;
  /** A restarted process of the crashed revision serves in its place. */
  adopt(key: string, slot: Slot, revision: Revision): void;
}

export class CrashRestarts {
  private readonly options: CrashRestartOptions;

  constructor(options: CrashRestartOptions) {
    this.options = options;
  }

  /** Restarts `revision` each time it exits while it is still its slot's serving revision. */
  watch(key: string, slot: Slot, revision: Revision): void {
    revision.process.once('exit', (code, signal) => {
      if (slot.removed || slot.current !== revision) return;
      this.options.logger.warn({ function: key, code, signal }, 'function process exited');
      slot.totalRestarts++;
      this.options.crashed(key, slot, revision, `process exited (${signal ?? `code ${code}`})`);
      this.schedule(key, slot, revision);
    });
  }

  /** Backoff doubles per crash up to 30 s; a revision that ran for a minute starts over at 100 ms. */
  private schedule(key: string, slot: Slot, crashed: Revision): void {
    if (Date.now() - slot.lastStart > 60_000) slot.restarts = 0;
    slot.restarts++;
    const delay = Math.min(100 * 2 ** (slot.restarts - 1), 30_000);
    this.options.logger.info(
      { function: key, restartInMs: delay, restarts: slot.restarts },
      'restarting function',
    );
    slot.restarting = setTimeout(() => void this.restart(key, slot, crashed), delay);
  }

  private async restart(key: string, slot: Slot, crashed: Revision): Promise<void> {
    if (slot.removed || slot.current !== crashed) return;
    try {
      const revision = await this.options.start(crashed.fn, crashed.build, crashed.id);
      if (slot.removed || slot.current !== crashed) {
        await revision.process.stop();
        return;
      }
      this.options.adopt(key, slot, revision);
    } catch (error) {
      this.options.logger.warn({ function: key, err: (error as Error).message }, 'restart failed');
      if (!slot.removed && slot.current === crashed) this.schedule(key, slot, crashed);
    }
  }
}
