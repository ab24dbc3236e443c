/**
 * Canaries on the local platform: a new revision started beside the serving one and given its share
 * of requests (the split itself is CanarySplit's), what is live of it for the reconcile that judges
 * it, and its end: promoted to serve every request, or aborted, drained and stopped.
 */

import type { Logger } from 'pino';
import { asError, RolloutError } from '../../core/errors.js';
import type { CanaryControl, DeployOptions, LiveCanary } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { CanarySplit } from './canary-split.js';
import type { ServingRecords } from './local-state.js';
import type { Revision, RevisionStarter } from './revisions.js';
import type { Slot } from './slots.js';

export interface CanaryRolloutOptions {
  /** Every function's slot, as the platform keeps it; canaries change only its `canary`. */
  slots: ReadonlyMap<string, Slot>;
  /** What canaries read of the platform's options. */
  options: {
    logger: Logger;
    serving?: ServingRecords;
    onChanged?: (namespace: string, name: string) => void;
  };
  revisions: Pick<RevisionStarter, 'start'>;
  /** A rollout at once, for a function with nothing running to compare the canary with. */
  deploy(fn: SlessFunction, build: BuildRecord, options: DeployOptions): Promise<void>;
  /** `revision` serves every request from now on; the one before drains and stops. */
  switchTo(key: string, slot: Slot, revision: Revision): void;
  /** Tells the gateway thread's mirror what serves `key` now. */
  mirrorRoute(key: string): void;
  /** Drains a revision's requests, then stops it. */
  retire(revision: Revision): Promise<void>;
}

export class CanaryRollouts {
  private readonly options: CanaryRolloutOptions['options'];
  private readonly slots: ReadonlyMap<string, Slot>;
  private readonly revisions: Pick<RevisionStarter, 'start'>;
  private readonly deploy: CanaryRolloutOptions['deploy'];
  private readonly switchTo: CanaryRolloutOptions['switchTo'];
  private readonly mirrorRoute: (key: string) => void;
  private readonly retire: (revision: Revision) => Promise<void>;

  constructor(deps: CanaryRolloutOptions) {
    this.options = deps.options;
    this.slots = deps.slots;
    this.revisions = deps.revisions;
    this.deploy = deps.deploy;
    this.switchTo = deps.switchTo;
    this.mirrorRoute = deps.mirrorRoute;
    this.retire = deps.retire;
  }

  readonly control: CanaryControl = {
    start: (fn, build, options, weight) => this.startCanary(fn, build, options, weight),
    live: (namespace, name) => this.liveCanary(objectKey(namespace, name)),
    setWeight: (namespace, name, weight) =>
      this.slots.get(objectKey(namespace, name))?.canary?.setWeight(weight),
    promote: (namespace, name) => this.promoteCanary(objectKey(namespace, name)),
    abort: async (namespace, name) => {
      const key = objectKey(namespace, name);
      const slot = this.slots.get(key);
      if (slot) await this.abortCanary(key, slot);
    },
  };

  private async startCanary(
    fn: SlessFunction,
    build: BuildRecord,
    options: DeployOptions,
    weight: number,
  ): Promise<void> {
    const key = objectKey(fn.metadata.namespace, fn.metadata.name);
    const slot = this.slots.get(key);
    // Nothing runs to compare with (a first rollout, a function at zero): rolled out at once.
    if (!slot?.current?.process.alive || !options.enabled || !slot.enabled)
      return this.deploy(fn, build, options);
    if (slot.canary) await this.abortCanary(key, slot);
    let revision: Revision;
    try {
      revision = await this.revisions.start(fn, build, options.revision);
    } catch (error) {
      throw new RolloutError(asError(error).message, error);
    }
    if (slot.removed || this.slots.get(key) !== slot) {
      await revision.process.stop();
      return;
    }
    // Another canary started meanwhile (a newer commit): the later one wins.
    if (slot.canary) await this.abortCanary(key, slot);
    const split = new CanarySplit(revision, weight);
    slot.canary = split;
    revision.process.once('exit', () => {
      if (slot.canary !== split) return;
      this.mirrorRoute(key);
      this.options.onChanged?.(fn.metadata.namespace, fn.metadata.name);
    });
    this.mirrorRoute(key);
    this.options.logger.info({ function: key, revision: revision.id, weight }, 'canary started');
  }

  private liveCanary(key: string): LiveCanary | undefined {
    const split = this.slots.get(key)?.canary;
    if (!split) return undefined;
    return {
      revision: split.revision.id,
      weight: split.weight,
      alive: split.revision.process.alive,
      since: split.since,
      figures: split.tally.figures(),
    };
  }

  private async promoteCanary(key: string): Promise<void> {
    const slot = this.slots.get(key);
    const split = slot?.canary;
    if (!slot || !split) return;
    const { fn, build, id } = split.revision;
    // Recorded before the route switches, as a rollout is: what clients saw served, a restart serves.
    await this.options.serving?.record({ fn, build, revision: id, enabled: true });
    if (slot.canary !== split || slot.removed) return;
    slot.canary = undefined;
    slot.parked = undefined;
    this.switchTo(key, slot, split.revision);
    this.options.logger.info({ function: key, revision: id }, 'canary promoted');
  }

  async abortCanary(key: string, slot: Slot): Promise<void> {
    const split = slot.canary;
    if (!split) return;
    slot.canary = undefined;
    this.mirrorRoute(key);
    await this.retire(split.revision);
  }
}
