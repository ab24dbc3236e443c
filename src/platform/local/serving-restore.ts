/**
 * Serving again after a restart: each function's revision recorded as serving before the last stop
 * is registered again from its build on disk and started (or left parked, for scale to zero), before
 * any git fetch, build or reconcile; what can no longer serve is forgotten, for a reconcile to deploy.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ObjectStore } from '../../core/interfaces.js';
import type { SlessFunction } from '../../core/resources.js';
import type { ServingRecord, ServingRecords } from './local-state.js';
import type { Slot } from './slots.js';

export interface ServingRestoreOptions {
  /** Every function's slot, as the platform keeps it: restoring registers each function's slot. */
  slots: Map<string, Slot>;
  /** What restoring reads of the platform's options. */
  options: { store: ObjectStore; logger: Logger; serving?: ServingRecords };
  /** What holds the function in, for status. */
  isolationOf(fn: SlessFunction): string;
  /** The function's scale-to-zero idle time; undefined: it always runs. */
  idleSecondsOf(fn: SlessFunction): number | undefined;
  /** Starts the slot's parked revision; `launched` once its process is spawned. */
  wake(key: string, slot: Slot, launched?: () => void): Promise<void>;
  /** Tells the gateway thread's mirror what serves `key` now. */
  mirrorRoute(key: string): void;
}

export class ServingRestore {
  private readonly options: ServingRestoreOptions['options'];
  private readonly slots: Map<string, Slot>;
  private readonly isolationOf: (fn: SlessFunction) => string;
  private readonly idleSecondsOf: (fn: SlessFunction) => number | undefined;
  private readonly wake: ServingRestoreOptions['wake'];
  private readonly mirrorRoute: (key: string) => void;

  constructor(deps: ServingRestoreOptions) {
    this.options = deps.options;
    this.slots = deps.slots;
    this.isolationOf = deps.isolationOf;
    this.idleSecondsOf = deps.idleSecondsOf;
    this.wake = deps.wake;
    this.mirrorRoute = deps.mirrorRoute;
  }

  /**
   * Serves again what served before the last stop, from the builds on disk, before anything else
   * runs: no git, no build, no reconcile. Each revision is registered at once (a request that comes
   * while it starts waits for it, as for a scale-to-zero wake-up); scale-to-zero revisions stay parked.
   * A revision whose build is gone or that no longer starts is forgotten, so the reconcile that
   * follows deploys the function afresh; so is one of a function the store no longer holds (its state
   * file was set aside), since no reconcile would ever stop it.
   * `launched` resolves once every process to restore has been spawned (or given up on), so the
   * caller can load what it needs next while they boot; `serving` once they all serve.
   */
  restore(): { launched: Promise<void>; serving: Promise<void> } {
    const records = this.options.serving?.all() ?? [];
    const launches: Promise<void>[] = [];
    const serving = Promise.all(
      records.map(([key, record]) => {
        let launched: () => void = () => undefined;
        launches.push(
          new Promise<void>((resolve) => {
            launched = resolve;
          }),
        );
        return (async () => {
          const { namespace, name } = record.fn.metadata;
          if (await this.options.store.get('Function', namespace, name))
            return this.restoreOne(key, record, launched);
          this.options.logger.warn(
            { function: key },
            'no Function for the revision that served; not restored',
          );
          await this.options.serving?.forget(key);
        })().finally(launched);
      }),
    ).then(() => undefined);
    return { launched: Promise.all(launches).then(() => undefined), serving };
  }

  private async restoreOne(key: string, record: ServingRecord, launched: () => void): Promise<void> {
    const log = this.options.logger.child({ function: key, revision: record.revision });
    const buildDir = record.build.image ?? '';
    if (!existsSync(join(buildDir, 'build.json'))) {
      log.warn(
        { buildDir },
        'the build that served before the restart is gone; the function is deployed afresh',
      );
      await this.options.serving?.forget(key);
      return;
    }
    const slot: Slot = {
      revisionId: record.revision,
      enabled: record.enabled,
      restarts: 0,
      totalRestarts: 0,
      isolation: this.isolationOf(record.fn),
      lastStart: 0,
      removed: false,
    };
    this.slots.set(key, slot);
    if (!record.enabled) return;
    slot.parked = { fn: record.fn, build: record.build, id: record.revision };
    if (this.idleSecondsOf(record.fn) !== undefined) return;
    slot.waking = this.wake(key, slot, launched).finally(() => {
      slot.waking = undefined;
    });
    try {
      await slot.waking;
      log.info('serving again from the build on disk');
    } catch (error) {
      log.warn(
        { err: (error as Error).message },
        'the revision that served before the restart does not start',
      );
      if (this.slots.get(key) === slot) this.slots.delete(key);
      slot.removed = true;
      this.mirrorRoute(key);
      await this.options.serving?.forget(key);
    }
  }
}
