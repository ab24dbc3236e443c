/**
 * Local mode's workload platform: each function's serving revision is a runtime server process on a
 * unix socket of its own. It does here what Kubernetes does in kube mode: rollouts without a gap,
 * restarts with backoff after a crash, scale to zero and wake-up on the next request, serving again
 * after a restart what served before it, and resolving each request to the revision that serves it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ActivityBoard } from '../../core/activity-board.js';
import { asError, RolloutError } from '../../core/errors.js';
import type {
  ObjectStore,
  ProcessLauncher,
  RouteMirror,
  RouteResolver,
  RouteState,
  UnavailableRoute,
  WorkloadObservation,
  WorkloadPlatform,
} from '../../core/interfaces.js';
import { OwnedTempDirs } from '../../core/owned-temp-dirs.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { RUNTIME_INFO } from '../../core/runtimes.js';
import { startupMark } from '../../core/startup-marks.js';
import { admissionOf } from '../../proxy/admission.js';
import type { FunctionLogBuffer } from './function-logs.js';
import type { PinnedBuilds, ServingRecord, ServingRecords } from './local-state.js';
import { type RuntimeCommand, RuntimeProcess } from './runtime-process.js';
import { SecretFiles, type SecretSource, secretEnv } from './secret-files.js';
import { resolveToolchain, toolchainRoot } from './toolchains.js';

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
}

/** Threads count too (Python serves each request on one): room for a busy server, not a fork bomb. */
export const FUNCTION_MAX_PROCESSES = 256;

interface Revision {
  id: string;
  fn: SlessFunction;
  build: BuildRecord;
  process: RuntimeProcess;
  /** Its in-flight requests and last activity on the ActivityBoard, wherever they were proxied. */
  activitySlot: number;
  /**
   * The route every request to this revision gets: one object and one `release` per revision, not
   * per request. A closure made per request cost the proxy about a tenth of its CPU per request,
   * measured against the same route object handed out each time.
   */
  route: ReadyRoute;
}

type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

interface Slot {
  revisionId: string;
  enabled: boolean;
  current?: Revision;
  /** Set while a crashed revision waits to be restarted. */
  restarting?: NodeJS.Timeout;
  restarts: number;
  /** Crashes since the last rollout, for status; `restarts` drives the backoff. */
  totalRestarts: number;
  /** The last crash since the last rollout, with the end of its output, for status. */
  lastCrash?: string;
  /** What holds the serving revision in, for status. */
  isolation?: string;
  lastStart: number;
  removed: boolean;
  /** Scaled to zero: what to start on the next request. */
  parked?: { fn: SlessFunction; build: BuildRecord; id: string };
  waking?: Promise<void>;
  idleTimer?: NodeJS.Timeout;
}

const HOST_ENV = /^(PATH|HOME|LANG|LC_\w+|TMPDIR|TZ|SYSTEMROOT)$/;

export function hostEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env))
    if (value !== undefined && HOST_ENV.test(key)) env[key] = value;
  return env;
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
  /**
   * One directory per function process, holding its unix socket: in the system's temp directory,
   * because a socket path must stay under 108 bytes wherever the state directory is.
   */
  private readonly sockets = new OwnedTempDirs('sless-fn-');
  /** Each process's secret files, in memory where the machine has /dev/shm, never in the state dir. */
  private readonly secretFiles = new SecretFiles();
  private readonly board: ActivityBoard;

  constructor(options: LocalPlatformOptions) {
    this.options = options;
    this.board = options.activity ?? new ActivityBoard();
  }

  /**
   * Tells the mirror what serves `key` now. Called after every change of a slot's current revision,
   * its enabled flag or its process's life; the mirror skips what it already has.
   */
  private mirrorRoute(key: string): void {
    const mirror = this.options.mirror;
    if (!mirror) return;
    const slot = this.slots.get(key);
    const [namespace = '', name = ''] = key.split('/');
    const revision = slot?.current;
    // The same answers, in the same order, as `resolve` gives.
    if (!slot || slot.removed) mirror.publish(key, undefined);
    else if (!slot.enabled) mirror.publish(key, disabled(namespace, name));
    // Parked or still starting: only the platform can wake it or wait for it.
    else if (!revision) mirror.publish(key, undefined);
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

  currentRevision(namespace: string, name: string): string | undefined {
    return this.slots.get(`${namespace}/${name}`)?.revisionId;
  }

  /** Builds that serve now or would after a restart; build garbage collection must keep them. */
  pinnedBuildDirs(): ReadonlySet<string> {
    const dirs = new Set(this.options.serving?.pinnedBuildDirs() ?? []);
    for (const slot of this.slots.values()) {
      const build = slot.current?.build ?? slot.parked?.build;
      if (build?.image) dirs.add(build.image);
    }
    return dirs;
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

  restartCount(namespace: string, name: string): number {
    return this.slots.get(`${namespace}/${name}`)?.totalRestarts ?? 0;
  }

  /** What status shows of the serving revision: its crashes, as Kubernetes shows pod restarts. */
  observe(fn: SlessFunction): WorkloadObservation | undefined {
    const slot = this.slots.get(`${fn.metadata.namespace}/${fn.metadata.name}`);
    if (!slot || slot.removed) return undefined;
    return {
      restarts: slot.totalRestarts,
      ...(slot.lastCrash ? { lastCrash: slot.lastCrash } : {}),
      ...(slot.isolation ? { isolation: slot.isolation } : {}),
    };
  }

  private recordCrash(slot: Slot, revision: Revision, message: string): void {
    slot.lastCrash = `${message}: ${revision.process.logTail().trim().split('\n').slice(-3).join(' | ')}`;
    this.options.onChanged?.(revision.fn.metadata.namespace, revision.fn.metadata.name);
  }

  async deploy(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean },
  ): Promise<void> {
    const key = `${fn.metadata.namespace}/${fn.metadata.name}`;
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
      this.mirrorRoute(key);
      clearTimeout(slot.restarting);
      clearTimeout(slot.idleTimer);
      if (previous) await this.retire(previous);
      return;
    }
    let revision: Revision;
    try {
      revision = await this.startRevision(fn, build, options.revision);
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
    const previous = slot.current;
    clearTimeout(slot.restarting);
    slot.restarting = undefined;
    slot.current = revision;
    slot.enabled = true;
    slot.revisionId = options.revision;
    slot.restarts = 0;
    slot.totalRestarts = 0;
    slot.lastCrash = undefined;
    slot.isolation = this.isolationOf(fn);
    slot.lastStart = Date.now();
    this.mirrorRoute(key);
    this.watchCrash(key, slot, revision);
    this.scheduleIdleCheck(slot, revision);
    // The new revision serves from here on; draining the old one must not hold up the next rollout.
    if (previous) this.retireInBackground(previous);
  }

  /** What holds this function in, said plainly in its status. */
  isolationOf(fn: SlessFunction): string {
    const report = this.options.launcher.report;
    const holds = (what: string) =>
      report.enforced.some((line) => line.startsWith(`${what}:`)) ? 'enforced' : 'NOT enforced';
    return [
      report.sandboxed ? 'sandboxed (bubblewrap, own uid, no network)' : 'NOT sandboxed',
      `memory ${fn.spec.memoryMb ?? 128} MiB ${holds('memory')}`,
      `processes <= ${FUNCTION_MAX_PROCESSES} ${holds('processes')}`,
    ].join('; ');
  }

  private retireInBackground(revision: Revision): void {
    const done = this.retire(revision).finally(() => this.retiring.delete(done));
    this.retiring.add(done);
  }

  async remove(namespace: string, name: string): Promise<void> {
    const key = `${namespace}/${name}`;
    const slot = this.slots.get(key);
    await this.options.serving?.forget(key);
    if (!slot) return;
    slot.removed = true;
    clearTimeout(slot.restarting);
    clearTimeout(slot.idleTimer);
    this.slots.delete(key);
    this.mirrorRoute(key);
    if (slot.current) {
      await this.options.mirror?.synced();
      await slot.current.process.stop();
    }
    this.options.logs?.forget(namespace, name);
  }

  async resolve(namespace: string, name: string): Promise<RouteState> {
    const slot = this.slots.get(`${namespace}/${name}`);
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
      slot.waking ??= this.wake(`${namespace}/${name}`, slot).finally(() => {
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
    this.board.begin(revision.activitySlot);
    return revision.route;
  }

  /** The host pid of the process serving the function now (in the sandbox, its outermost process). */
  processId(namespace: string, name: string): number | undefined {
    return this.slots.get(`${namespace}/${name}`)?.current?.process.pid;
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
    const slot = this.slots.get(`${namespace}/${name}`);
    return slot?.parked !== undefined && slot.current === undefined;
  }

  private async wake(key: string, slot: Slot, launched?: () => void): Promise<void> {
    const parked = slot.parked;
    if (!parked) return;
    const revision = await this.startRevision(parked.fn, parked.build, parked.id, launched);
    if (slot.removed || slot.parked !== parked) {
      await revision.process.stop();
      return;
    }
    slot.parked = undefined;
    slot.current = revision;
    this.mirrorRoute(key);
    startupMark('routed', key);
    slot.lastStart = Date.now();
    this.watchCrash(key, slot, revision);
    this.scheduleIdleCheck(slot, revision);
    if (this.idleSecondsOf(parked.fn) !== undefined)
      this.options.onChanged?.(parked.fn.metadata.namespace, parked.fn.metadata.name);
  }

  /** Stops a scale-to-zero revision once it has been idle for `idleSeconds`. */
  private scheduleIdleCheck(slot: Slot, revision: Revision): void {
    const idleSeconds = this.idleSecondsOf(revision.fn);
    clearTimeout(slot.idleTimer);
    if (idleSeconds === undefined) return;
    const idleMs = idleSeconds * 1000;
    const check = () => {
      if (slot.removed || slot.current !== revision) return;
      const idleFor = Date.now() - this.board.lastActivityOf(revision.activitySlot);
      if (this.board.inflightOf(revision.activitySlot) > 0 || idleFor < idleMs) {
        slot.idleTimer = setTimeout(check, Math.max(idleMs - idleFor, 50));
        return;
      }
      slot.parked = { fn: revision.fn, build: revision.build, id: revision.id };
      slot.current = undefined;
      const key = `${revision.fn.metadata.namespace}/${revision.fn.metadata.name}`;
      this.mirrorRoute(key);
      this.options.logger.info({ function: key, idleSeconds }, 'scaled to zero');
      // A request the gateway thread sent before it learned of this is let finish.
      this.retireInBackground(revision);
      this.options.onChanged?.(revision.fn.metadata.namespace, revision.fn.metadata.name);
    };
    slot.idleTimer = setTimeout(check, idleMs);
  }

  async stopAll(): Promise<void> {
    const stops: Promise<void>[] = [];
    for (const slot of this.slots.values()) {
      slot.removed = true;
      clearTimeout(slot.restarting);
      clearTimeout(slot.idleTimer);
      if (slot.current) stops.push(slot.current.process.stop());
    }
    const keys = [...this.slots.keys()];
    this.slots.clear();
    for (const key of keys) this.mirrorRoute(key);
    await Promise.all([...stops, ...this.retiring]);
    await this.sockets.removeAll();
    await this.secretFiles.removeAll();
  }

  private async startRevision(
    fn: SlessFunction,
    build: BuildRecord,
    id: string,
    launched?: () => void,
  ): Promise<Revision> {
    const logger = this.options.logger.child({
      function: `${fn.metadata.namespace}/${fn.metadata.name}`,
      revision: id,
    });
    // Each process serves on a unix socket in a directory of its own, the only place it may write: a
    // sandboxed function has its own network namespace, where a port would be out of reach.
    const socketDir = await this.sockets.create();
    await this.options.launcher.grant(fn.metadata.namespace, socketDir);
    let command: RuntimeCommand;
    let secretDir: string | undefined;
    try {
      command = this.runtimeCommand(fn, build);
      const files = await this.secretFiles.prepare(fn, this.options.secrets, this.options.launcher);
      secretDir = files?.dir;
      command.sandbox = {
        readable: [],
        ...command.sandbox,
        tenant: fn.metadata.namespace,
        writable: [socketDir],
        ...(files ? { mounts: files.mounts } : {}),
      };
    } catch (error) {
      await this.sockets.remove(socketDir);
      throw error;
    }
    const { namespace, name } = fn.metadata;
    const logs = this.options.logs;
    const process = new RuntimeProcess(
      command,
      { socketPath: join(socketDir, 'http.sock') },
      logger,
      logs && ((stream) => logs.writer(namespace, name, `${name}-${id}`, stream)),
      this.options.launcher,
    );
    process.once('exit', () => {
      void this.sockets.remove(socketDir);
      if (secretDir) void this.secretFiles.remove(secretDir);
    });
    try {
      // start() spawns the process before its first await.
      const started = process.start(this.options.startTimeoutMs ?? 30_000);
      launched?.();
      await started;
    } catch (error) {
      await this.sockets.remove(socketDir);
      if (secretDir) await this.secretFiles.remove(secretDir);
      throw error;
    }
    const activitySlot = this.board.allocate();
    if (activitySlot === undefined) {
      await process.stop();
      throw new Error('too many revisions alive at once to count their requests');
    }
    process.once('exit', () => void this.freeActivitySlot(`${namespace}/${name}`, activitySlot));
    const board = this.board;
    const revision: Revision = {
      id,
      fn,
      build,
      process,
      activitySlot,
      route: {
        state: 'ready',
        origin: process.origin,
        ...(process.socketPath ? { socketPath: process.socketPath } : {}),
        timeoutSec: fn.spec.timeoutSec ?? 30,
        // One process per function here.
        ...admissionOf(fn.spec.scale, 1),
        // Called once per resolve (the proxy and the cron scheduler each release what they resolved).
        release: () => board.end(activitySlot),
      },
    };
    return revision;
  }

  private watchCrash(key: string, slot: Slot, revision: Revision): void {
    revision.process.once('exit', (code, signal) => {
      if (slot.removed || slot.current !== revision) return;
      this.mirrorRoute(key);
      this.options.logger.warn({ function: key, code, signal }, 'function process exited');
      slot.totalRestarts++;
      this.recordCrash(slot, revision, `process exited (${signal ?? `code ${code}`})`);
      this.scheduleRestart(key, slot, revision);
    });
  }

  /** Backoff doubles per crash up to 30 s; a revision that ran for a minute starts over at 100 ms. */
  private scheduleRestart(key: string, slot: Slot, crashed: Revision): void {
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
      const revision = await this.startRevision(crashed.fn, crashed.build, crashed.id);
      if (slot.removed || slot.current !== crashed) {
        await revision.process.stop();
        return;
      }
      slot.current = revision;
      slot.lastStart = Date.now();
      this.mirrorRoute(key);
      this.watchCrash(key, slot, revision);
      this.scheduleIdleCheck(slot, revision);
    } catch (error) {
      this.options.logger.warn({ function: key, err: (error as Error).message }, 'restart failed');
      if (!slot.removed && slot.current === crashed) this.scheduleRestart(key, slot, crashed);
    }
  }

  /**
   * Waits for in-flight requests (up to the function's timeout), then stops the process. Its route was
   * replaced before this is called; the mirror's acknowledgement comes first, so that no request can
   * still start after the count is read.
   */
  private async retire(revision: Revision): Promise<void> {
    await this.options.mirror?.synced();
    const limitMs = ((revision.fn.spec.timeoutSec ?? 30) + 1) * 1000;
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
    this.mirrorRoute(key);
    await this.options.mirror?.synced();
    if (await this.board.waitIdle(activitySlot, 60_000, false)) this.board.free(activitySlot);
  }

  /** How a build of this function runs here; FunctionJobs use it too, in one-shot mode. */
  runtimeCommand(fn: SlessFunction, build: BuildRecord): RuntimeCommand {
    const buildDir = build.image ?? '';
    const codeDir = join(buildDir, 'code');
    // Its own build (read-only) and the runtime servers are all of sless's files it can see.
    const sandbox = {
      tenant: fn.metadata.namespace,
      readable: [buildDir, this.options.runtimesDir],
      writable: [],
      memoryMb: fn.spec.memoryMb ?? 128,
      maxProcesses: FUNCTION_MAX_PROCESSES,
    };
    const env: Record<string, string> = {
      ...(this.options.baseEnv ?? hostEnv()),
      ...sortedEnv(fn.spec.env),
      // Read at each start: a process started after a rotation gets the new value.
      ...secretEnv(fn, this.options.secrets),
      SLESS_ENTRYPOINT: fn.spec.entrypoint,
      SLESS_CODE_DIR: codeDir,
      SLESS_FUNCTION_NAME: fn.metadata.name,
      SLESS_NAMESPACE: fn.metadata.namespace,
      SLESS_TIMEOUT_SEC: String(fn.spec.timeoutSec ?? 30),
      SLESS_MEMORY_MB: String(fn.spec.memoryMb ?? 128),
    };
    const toolchain = resolveToolchain(fn.spec.runtime);
    const runtimeDir = join(this.options.runtimesDir, RUNTIME_INFO[fn.spec.runtime].serverDir);
    // A build checks the toolchain first; one removed since is said here, not as a spawn error.
    if (!toolchain.found && RUNTIME_INFO[fn.spec.runtime].family !== 'go') throw new Error(toolchain.reason);
    const interpreter = toolchain.found ? toolchain.command : '';
    // An interpreter kept outside the system's directories must be visible inside the sandbox too.
    const root = toolchainRoot(toolchain);
    if (root) sandbox.readable.push(root);
    switch (RUNTIME_INFO[fn.spec.runtime].family) {
      case 'node':
        return {
          command: interpreter,
          args: [
            `--max-old-space-size=${Math.max(fn.spec.memoryMb ?? 128, 64)}`,
            // The build root holds a typeless package.json that the image does not have; without
            // this, ES module syntax in code with no package.json would warn here and not there.
            ...(existsSync(join(codeDir, 'package.json'))
              ? []
              : ['--disable-warning=MODULE_TYPELESS_PACKAGE_JSON']),
            join(runtimeDir, 'server.js'),
          ],
          cwd: codeDir,
          env,
          sandbox,
        };
      case 'python':
        return {
          command: interpreter,
          // -S as in the image: only the standard library, the code and its installed requirements
          // are importable, never packages that happen to be installed on this host.
          args: ['-S', join(runtimeDir, 'server.py')],
          cwd: codeDir,
          env: {
            ...env,
            PYTHONPATH: join(buildDir, 'deps'),
            PYTHONDONTWRITEBYTECODE: '1',
            PYTHONUNBUFFERED: '1',
          },
          sandbox,
        };
      case 'go':
        return { command: join(buildDir, 'bin', 'function'), args: [], cwd: codeDir, env, sandbox };
    }
  }
}

/** The plain variables; secret references are resolved by secretEnv. */
function sortedEnv(env: Record<string, unknown> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env ?? {})
      .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

function disabled(namespace: string, name: string): UnavailableRoute {
  return { state: 'unavailable', status: 503, message: `function ${namespace}/${name} is disabled` };
}

function restartingAfterCrash(namespace: string, name: string): UnavailableRoute {
  return {
    state: 'unavailable',
    status: 503,
    message: `function ${namespace}/${name} is restarting after a crash`,
  };
}
