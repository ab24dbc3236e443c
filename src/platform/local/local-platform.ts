/**
 * Local mode's workload platform: each function's serving revision is a runtime server process on a
 * unix socket of its own. It does here what Kubernetes does in kube mode: rollouts without a gap,
 * restarts with backoff after a crash, scale to zero and wake-up on the next request, serving again
 * after a restart what served before it, and resolving each request to the revision that serves it.
 */

import type { Logger } from 'pino';
import { ActivityBoard } from '../../core/activity-board.js';
import { timeoutSecOf } from '../../core/defaults.js';
import { asError, RolloutError } from '../../core/errors.js';
import type {
  CanaryControl,
  ObjectStore,
  ProcessLauncher,
  RouteMirror,
  RouteResolver,
  RouteState,
  WorkloadObservation,
  WorkloadPlatform,
} from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { startupMark } from '../../core/startup-marks.js';
import { CanaryRollouts } from './canary-rollouts.js';
import { CommitRevisions } from './commit-revisions.js';
import { CrashRestarts } from './crash-restarts.js';
import type { FunctionLogBuffer } from './function-logs.js';
import { IdleStops } from './idle-stops.js';
import type { ScalableFunction } from './local-autoscaler.js';
import type { PinnedBuilds, ServingRecords } from './local-state.js';
import { type Revision, RevisionStarter } from './revisions.js';
import { Routes } from './routes.js';
import { RuntimeCommands } from './runtime-commands.js';
import type { RuntimeCommand } from './runtime-process.js';
import { ScaleOut } from './scale-out.js';
import type { SecretSource } from './secret-files.js';
import { ServingRestore } from './serving-restore.js';
import type { Slot } from './slots.js';

export interface LocalPlatformOptions {
  runtimesDir: string;
  store: ObjectStore;
  logger: Logger;
  /** Starts function processes: sandboxed where the machine allows it. */
  launcher: ProcessLauncher;
  startTimeoutMs?: number;
  /** Host-level variables a runtime needs to run at all (PATH, HOME, locale); never secrets. */
  baseEnv?: Record<string, string>;
  /** Where runtime output goes for the logs API. */
  logs?: FunctionLogBuffer;
  /**
   * Scale to zero for every function that sets no `scaleToZero` of its own (`--scale-to-zero-after`):
   * idle functions then cost no process, which is what lets a repository of a thousand functions fit.
   */
  defaultIdleSeconds?: number;
  /** Where the serving revision of each function is kept across restarts; none: nothing survives. */
  serving?: ServingRecords;
  /**
   * Told when what it observes of a function changes (stopped or started by scale to zero, a
   * crash), so the function's reconcile can say so in its status.
   */
  onChanged?: (namespace: string, name: string) => void;
  /**
   * Where requests are counted per revision; shared with the gateway thread when it proxies `/fn/`
   * (`mirror`), so draining and scale-to-zero see its requests too.
   */
  activity?: ActivityBoard;
  /** Told every change of a function's ready route, for a proxy that serves outside `resolve`. */
  mirror?: RouteMirror;
  /** The secrets store: values for `secretRef` variables and `spec.secrets` files, at each start. */
  secrets?: SecretSource;
  /**
   * The kept build of a function at a commit, for `/fn/{ns}/{name}@{commit}`; without it, such URLs
   * answer 404.
   */
  keptBuild?: (namespace: string, name: string, commit: string) => Promise<BuildRecord | undefined>;
}

/**
 * Runs each function as a runtime server process listening on a unix socket of its own. A rollout
 * starts the new revision, waits for /healthz, switches the route in one assignment, then drains and
 * stops the old process: requests never see a gap.
 */
export class LocalPlatform implements WorkloadPlatform, RouteResolver, PinnedBuilds {
  private readonly options: LocalPlatformOptions;
  private readonly slots = new Map<string, Slot>();
  private readonly retiring = new Set<Promise<void>>();
  private readonly board: ActivityBoard;
  private readonly commands: RuntimeCommands;
  private readonly revisions: RevisionStarter;
  private readonly crashes: CrashRestarts;
  private readonly idleStops: IdleStops;
  /** Kept builds called by commit, each its own process while used. */
  private readonly commits: CommitRevisions;
  private readonly routes: Routes;
  private readonly scaleOut: ScaleOut;
  private readonly canaries: CanaryRollouts;
  /** A new revision beside the serving one, judged on its share of requests. */
  readonly canary: CanaryControl;
  private readonly restorer: ServingRestore;

  constructor(options: LocalPlatformOptions) {
    this.options = options;
    this.board = options.activity ?? new ActivityBoard();
    this.commands = new RuntimeCommands(options);
    this.revisions = new RevisionStarter({
      ...options,
      commands: this.commands,
      board: this.board,
      onExit: (key, activitySlot) => void this.freeActivitySlot(key, activitySlot),
    });
    this.crashes = new CrashRestarts({
      logger: options.logger,
      start: (fn, build, id) => this.revisions.start(fn, build, id),
      crashed: (key, slot, revision, message) => this.recordCrash(key, slot, revision, message),
      adopt: (key, slot, revision) => this.adoptRestarted(key, slot, revision),
    });
    this.idleStops = new IdleStops({
      board: this.board,
      idleSecondsOf: (fn) => this.idleSecondsOf(fn),
      park: (slot, revision, idleSeconds) => this.park(slot, revision, idleSeconds),
    });
    this.commits = new CommitRevisions({
      store: options.store,
      findBuild: async (ns, name, commit) => options.keptBuild?.(ns, name, commit),
      start: (fn, build, id) => this.revisions.start(fn, build, id),
      board: this.board,
      logger: options.logger,
      idleSeconds: (fn) => fn.spec.scaleToZero?.idleSeconds,
    });
    this.routes = new Routes({
      slots: this.slots,
      board: this.board,
      options,
      commits: this.commits,
      wake: (key, slot) => this.wake(key, slot),
    });
    this.scaleOut = new ScaleOut({
      slots: this.slots,
      board: this.board,
      options,
      revisions: this.revisions,
      mirrorRoute: (key) => this.routes.mirrorRoute(key),
      retire: (revision) => this.retire(revision),
      retireInBackground: (revision) => this.retireInBackground(revision),
    });
    this.canaries = new CanaryRollouts({
      slots: this.slots,
      options,
      revisions: this.revisions,
      deploy: (fn, build, deployOptions) => this.deploy(fn, build, deployOptions),
      switchTo: (key, slot, revision) => this.switchTo(key, slot, revision),
      mirrorRoute: (key) => this.routes.mirrorRoute(key),
      retire: (revision) => this.retire(revision),
    });
    this.canary = this.canaries.control;
    this.restorer = new ServingRestore({
      slots: this.slots,
      options,
      isolationOf: (fn) => this.isolationOf(fn),
      idleSecondsOf: (fn) => this.idleSecondsOf(fn),
      wake: (key, slot, launched) => this.wake(key, slot, launched),
      mirrorRoute: (key) => this.routes.mirrorRoute(key),
    });
  }

  currentRevision(namespace: string, name: string): string | undefined {
    return this.slots.get(objectKey(namespace, name))?.revisionId;
  }

  /** Builds that serve now or would after a restart; build garbage collection must keep them. */
  pinnedBuildDirs(): ReadonlySet<string> {
    const dirs = new Set(this.options.serving?.pinnedBuildDirs() ?? []);
    for (const slot of this.slots.values()) {
      const build = slot.current?.build ?? slot.parked?.build;
      if (build?.image) dirs.add(build.image);
      const canary = slot.canary?.revision.build.image;
      if (canary) dirs.add(canary);
    }
    for (const dir of this.commits.buildDirs()) dirs.add(dir);
    return dirs;
  }

  /** Serves again what served before the last stop (see ServingRestore.restore). */
  restore(): { launched: Promise<void>; serving: Promise<void> } {
    return this.restorer.restore();
  }

  restartCount(namespace: string, name: string): number {
    return this.slots.get(objectKey(namespace, name))?.totalRestarts ?? 0;
  }

  /** What status shows of the serving revision: its crashes, as Kubernetes shows pod restarts. */
  observe(fn: SlessFunction): WorkloadObservation | undefined {
    const slot = this.slots.get(objectKey(fn.metadata.namespace, fn.metadata.name));
    if (!slot || slot.removed) return undefined;
    const running = slot.current !== undefined;
    const instances = running ? [slot.current, ...(slot.extras ?? [])] : [];
    return {
      restarts: slot.totalRestarts,
      // It runs unless disabled or scaled to zero, as many instances as the autoscaler asked for.
      instances: {
        desired: slot.enabled && (running || !slot.parked) ? Math.max(slot.desiredInstances ?? 1, 1) : 0,
        ready: instances.filter((r) => r?.process.alive).length,
      },
      ...(slot.lastCrash ? { lastCrash: slot.lastCrash } : {}),
      ...(slot.isolation ? { isolation: slot.isolation } : {}),
    };
  }

  private recordCrash(key: string, slot: Slot, revision: Revision, message: string): void {
    this.routes.mirrorRoute(key);
    slot.lastCrash = `${message}: ${revision.process.logTail().trim().split('\n').slice(-3).join(' | ')}`;
    this.options.onChanged?.(revision.fn.metadata.namespace, revision.fn.metadata.name);
  }

  /** Stops an idle scale-to-zero revision; the next request starts it again. */
  private park(slot: Slot, revision: Revision, idleSeconds: number): void {
    // Requests spread over the instances: the function is idle once the autoscaler is back at one.
    if (slot.extras?.length) {
      this.idleStops.schedule(slot, revision);
      return;
    }
    slot.parked = { fn: revision.fn, build: revision.build, id: revision.id };
    slot.current = undefined;
    const key = objectKey(revision.fn.metadata.namespace, revision.fn.metadata.name);
    this.routes.mirrorRoute(key);
    this.options.logger.info({ function: key, idleSeconds }, 'scaled to zero');
    // A request the gateway thread sent before it learned of this is let finish.
    this.retireInBackground(revision);
    this.options.onChanged?.(revision.fn.metadata.namespace, revision.fn.metadata.name);
  }

  /** A restarted process of a crashed revision takes its place. */
  private adoptRestarted(key: string, slot: Slot, revision: Revision): void {
    slot.current = revision;
    slot.lastStart = Date.now();
    this.routes.mirrorRoute(key);
    this.crashes.watch(key, slot, revision);
    this.idleStops.schedule(slot, revision);
  }

  async deploy(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean },
  ): Promise<void> {
    const key = objectKey(fn.metadata.namespace, fn.metadata.name);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = {
        revisionId: '',
        enabled: options.enabled,
        restarts: 0,
        totalRestarts: 0,
        lastStart: 0,
        removed: false,
      };
      this.slots.set(key, slot);
    }
    // A revision rolled out at once replaces any canary in progress.
    if (slot.canary) await this.canaries.abortCanary(key, slot);
    if (options.enabled && !slot.current && this.idleSecondsOf(fn) !== undefined) {
      // Lazy start: nothing runs for this function now, so nothing is waiting for it; the first
      // request starts this revision (and waits for /healthz) as it would after an idle stop.
      // Recorded like a started revision, so a restart parks it again instead of rolling it out anew
      // (with a thousand parked functions, a thousand rollouts and their status writes per restart).
      await this.options.serving?.record({ fn, build, revision: options.revision, enabled: true });
      if (slot.removed) {
        await this.options.serving?.forget(key);
        return;
      }
      // A request may have woken the previous revision meanwhile: then this one rolls out as usual.
      if (!slot.current) {
        slot.parked = { fn, build, id: options.revision };
        slot.enabled = true;
        slot.revisionId = options.revision;
        clearTimeout(slot.restarting);
        slot.restarting = undefined;
        slot.restarts = 0;
        slot.totalRestarts = 0;
        slot.lastCrash = undefined;
        slot.isolation = this.isolationOf(fn);
        return;
      }
    }
    slot.parked = undefined;
    if (!options.enabled) {
      await this.options.serving?.record({ fn, build, revision: options.revision, enabled: false });
      const previous = slot.current;
      slot.current = undefined;
      slot.enabled = false;
      slot.revisionId = options.revision;
      this.routes.mirrorRoute(key);
      clearTimeout(slot.restarting);
      clearTimeout(slot.idleTimer);
      if (previous) await this.retire(previous);
      await this.scaleOut.retireExtras(key, slot);
      await this.commits.stop(key);
      return;
    }
    let revision: Revision;
    try {
      revision = await this.revisions.start(fn, build, options.revision);
    } catch (error) {
      throw new RolloutError(asError(error).message, error);
    }
    if (slot.removed) {
      await revision.process.stop();
      return;
    }
    // Recorded before the route switches: whatever a client has seen served, a restart serves too.
    await this.options.serving?.record({ fn, build, revision: options.revision, enabled: true });
    if (slot.removed) {
      await this.options.serving?.forget(key);
      await revision.process.stop();
      return;
    }
    this.switchTo(key, slot, revision);
  }

  /** `revision` serves every request from now on; the one before drains and stops. */
  private switchTo(key: string, slot: Slot, revision: Revision): void {
    const previous = slot.current;
    clearTimeout(slot.restarting);
    slot.restarting = undefined;
    slot.current = revision;
    slot.enabled = true;
    slot.revisionId = revision.id;
    slot.restarts = 0;
    slot.totalRestarts = 0;
    slot.lastCrash = undefined;
    slot.isolation = this.isolationOf(revision.fn);
    slot.lastStart = Date.now();
    this.routes.mirrorRoute(key);
    this.crashes.watch(key, slot, revision);
    this.idleStops.schedule(slot, revision);
    // The new revision serves from here on; draining the old one must not hold up the next rollout.
    if (previous) this.retireInBackground(previous);
    // The old revision's extra instances go with it; the autoscaler scales the new one.
    void this.scaleOut.retireExtras(key, slot);
  }

  /** Functions the autoscaler may scale now: with `spec.scale`, serving, and no canary deciding. */
  scalable(): ScalableFunction[] {
    return this.scaleOut.scalable();
  }

  /** Runs `instances` processes of the serving revision (see ScaleOut.scaleTo). */
  scaleTo(key: string, instances: number): Promise<void> {
    return this.scaleOut.scaleTo(key, instances);
  }

  /** What holds this function in, said plainly in its status. */
  isolationOf(fn: SlessFunction): string {
    return this.commands.isolationOf(fn);
  }

  private retireInBackground(revision: Revision): void {
    const done = this.retire(revision).finally(() => this.retiring.delete(done));
    this.retiring.add(done);
  }

  async remove(namespace: string, name: string): Promise<void> {
    const key = objectKey(namespace, name);
    const slot = this.slots.get(key);
    await this.options.serving?.forget(key);
    if (!slot) return;
    slot.removed = true;
    clearTimeout(slot.restarting);
    clearTimeout(slot.idleTimer);
    this.slots.delete(key);
    this.routes.mirrorRoute(key);
    await this.commits.stop(key);
    if (slot.canary) await slot.canary.revision.process.stop();
    for (const extra of slot.extras ?? []) await extra.process.stop();
    if (slot.current) {
      await this.options.mirror?.synced();
      await slot.current.process.stop();
    }
    this.options.logs?.forget(namespace, name);
  }

  resolve(namespace: string, segment: string): Promise<RouteState> {
    return this.routes.resolve(namespace, segment);
  }

  /** The host pid of the canary's process, while a canary runs. */
  canaryProcessId(namespace: string, name: string): number | undefined {
    return this.slots.get(objectKey(namespace, name))?.canary?.revision.process.pid;
  }

  /** Commits whose kept builds run now for `@commit` requests, besides the serving revision. */
  commitRevisions(namespace: string, name: string): string[] {
    return this.commits.running(namespace, name);
  }

  /** The host pid of the process serving the function now (in the sandbox, its outermost process). */
  processId(namespace: string, name: string): number | undefined {
    return this.slots.get(objectKey(namespace, name))?.current?.process.pid;
  }

  private idleSecondsOf(fn: SlessFunction): number | undefined {
    return fn.spec.scaleToZero?.idleSeconds ?? this.options.defaultIdleSeconds;
  }

  async scaledToZero(fn: SlessFunction): Promise<boolean | undefined> {
    if (this.idleSecondsOf(fn) === undefined) return undefined;
    return this.isParked(fn.metadata.namespace, fn.metadata.name);
  }

  /** True while a scale-to-zero function has no process. */
  isParked(namespace: string, name: string): boolean {
    const slot = this.slots.get(objectKey(namespace, name));
    return slot?.parked !== undefined && slot.current === undefined;
  }

  private async wake(key: string, slot: Slot, launched?: () => void): Promise<void> {
    const parked = slot.parked;
    if (!parked) return;
    const revision = await this.revisions.start(parked.fn, parked.build, parked.id, launched);
    if (slot.removed || slot.parked !== parked) {
      await revision.process.stop();
      return;
    }
    slot.parked = undefined;
    slot.current = revision;
    this.routes.mirrorRoute(key);
    startupMark('routed', key);
    slot.lastStart = Date.now();
    this.crashes.watch(key, slot, revision);
    this.idleStops.schedule(slot, revision);
    if (this.idleSecondsOf(parked.fn) !== undefined)
      this.options.onChanged?.(parked.fn.metadata.namespace, parked.fn.metadata.name);
  }

  async stopAll(): Promise<void> {
    const stops: Promise<void>[] = [];
    for (const slot of this.slots.values()) {
      slot.removed = true;
      clearTimeout(slot.restarting);
      clearTimeout(slot.idleTimer);
      if (slot.current) stops.push(slot.current.process.stop());
      if (slot.canary) stops.push(slot.canary.revision.process.stop());
      for (const extra of slot.extras ?? []) stops.push(extra.process.stop());
    }
    const keys = [...this.slots.keys()];
    this.slots.clear();
    for (const key of keys) this.routes.mirrorRoute(key);
    stops.push(this.commits.stop());
    await Promise.all([...stops, ...this.retiring]);
    await this.revisions.removeAll();
  }

  /**
   * Waits for in-flight requests (up to the function's timeout), then stops the process. Its route was
   * replaced before this is called; the mirror's acknowledgement comes first, so that no request can
   * still start after the count is read.
   */
  private async retire(revision: Revision): Promise<void> {
    await this.options.mirror?.synced();
    const limitMs = (timeoutSecOf(revision.fn) + 1) * 1000;
    await this.board.waitIdle(revision.activitySlot, limitMs);
    await revision.process.stop();
  }

  /**
   * A revision's process is gone: its slot is reused once nothing can count in it any more. A request
   * still counted after a minute (a client that never finishes) keeps the slot from reuse, since its
   * late end would be counted against another revision.
   */
  private async freeActivitySlot(key: string, activitySlot: number): Promise<void> {
    // This exit listener runs before watchCrash's, which withdraws a crashed revision's route: the
    // withdrawal must be published before the wait, or the thread could still count in the slot.
    this.routes.mirrorRoute(key);
    await this.options.mirror?.synced();
    if (await this.board.waitIdle(activitySlot, 60_000, false)) this.board.free(activitySlot);
  }

  /** How a build of this function runs here; FunctionJobs use it too, in one-shot mode. */
  runtimeCommand(fn: SlessFunction, build: BuildRecord): RuntimeCommand {
    return this.commands.commandFor(fn, build);
  }
}
