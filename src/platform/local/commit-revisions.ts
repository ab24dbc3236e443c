/**
 * `/fn/{ns}/{name}@{commit}` on the local platform: the kept build made at that commit, started on
 * the first request like a function at zero, stopped again once idle. It runs with the Function's
 * current settings (env, memory, timeout), since a build keeps the code, not the manifest. Such
 * revisions are few and short-lived: at most a few per function run at once, least recently used
 * stopped first, so calling old commits cannot fill the machine with processes.
 */

import type { Logger } from 'pino';
import type { ActivityBoard } from '../../core/activity-board.js';
import { asError } from '../../core/errors.js';
import type { ObjectStore, RouteState } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { commitMatches, noKeptBuildMessage } from '../../core/revision-ref.js';

type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

/** What the platform hands back for a started process: its route and where it counts requests. */
export interface RunningRevision {
  route: ReadyRoute;
  activitySlot: number;
  process: {
    readonly alive: boolean;
    stop(): Promise<void>;
    once(event: 'exit', listener: () => void): void;
  };
}

export interface CommitRevisionsOptions {
  store: ObjectStore;
  /** The kept successful build of the function at that commit; undefined once collected. */
  findBuild(namespace: string, name: string, commit: string): Promise<BuildRecord | undefined>;
  /** Starts a process for the build and resolves once it answers /healthz. */
  start(fn: SlessFunction, build: BuildRecord, id: string): Promise<RunningRevision>;
  board: ActivityBoard;
  logger: Logger;
  /** How long an unused commit revision keeps running (default: 60 s, or the function's idleSeconds). */
  idleSeconds?: (fn: SlessFunction) => number | undefined;
  /** Commit revisions of one function running at once (default 3). */
  maxPerFunction?: number;
}

interface Entry {
  fnKey: string;
  commit: string;
  build: BuildRecord;
  starting?: Promise<RunningRevision>;
  running?: RunningRevision;
  idleTimer?: NodeJS.Timeout;
  lastUsed: number;
  stopped: boolean;
}

const DEFAULT_IDLE_SECONDS = 60;

export class CommitRevisions {
  private readonly options: CommitRevisionsOptions;
  private readonly entries = new Set<Entry>();

  constructor(options: CommitRevisionsOptions) {
    this.options = options;
  }

  /** Build directories of commit revisions that run or start now: garbage collection keeps them. */
  buildDirs(): string[] {
    return [...this.entries].flatMap((entry) => (entry.build.image ? [entry.build.image] : []));
  }

  /** The commits of a function whose builds run now (or start), for status and tests. */
  running(namespace: string, name: string): string[] {
    const fnKey = objectKey(namespace, name);
    return [...this.entries].filter((e) => e.fnKey === fnKey && !e.stopped).map((e) => e.commit);
  }

  async resolve(namespace: string, name: string, commit: string): Promise<RouteState> {
    const fnKey = objectKey(namespace, name);
    const label = `${namespace}/${name}@${commit}`;
    let entry = this.find(fnKey, commit);
    if (!entry) {
      const fn = await this.options.store.get('Function', namespace, name);
      if (!fn) return { state: 'unknown' };
      const build = await this.options.findBuild(namespace, name, commit);
      if (!build)
        return {
          state: 'unavailable',
          status: 404,
          message: noKeptBuildMessage(namespace, name, commit),
        };
      // Another request may have started it while this one read the disk.
      entry = this.find(fnKey, build.commit) ?? this.launch(fnKey, fn, build);
    }
    entry.lastUsed = Date.now();
    let running: RunningRevision;
    try {
      running = entry.running ?? (await (entry.starting as Promise<RunningRevision>));
    } catch (error) {
      return {
        state: 'unavailable',
        status: 502,
        message: `function ${label} failed to start: ${asError(error).message}`,
      };
    }
    if (!running.process.alive || entry.stopped)
      return { state: 'unavailable', status: 503, message: `function ${label} stopped; try again` };
    this.options.board.begin(running.activitySlot);
    return running.route;
  }

  /** Stops the commit revisions of one function (it was removed), or of all. */
  async stop(fnKey?: string): Promise<void> {
    const stops: Promise<void>[] = [];
    for (const entry of this.entries)
      if (fnKey === undefined || entry.fnKey === fnKey) stops.push(this.end(entry));
    await Promise.all(stops);
  }

  private find(fnKey: string, commit: string): Entry | undefined {
    for (const entry of this.entries)
      if (entry.fnKey === fnKey && !entry.stopped && commitMatches(entry.build.commit, commit)) return entry;
    return undefined;
  }

  private launch(fnKey: string, fn: SlessFunction, build: BuildRecord): Entry {
    this.makeRoom(fnKey);
    const entry: Entry = { fnKey, commit: build.commit, build, lastUsed: Date.now(), stopped: false };
    this.entries.add(entry);
    const id = `${build.buildKey.slice(0, 12)}-at-${build.commit.slice(0, 12)}`;
    entry.starting = this.options.start(fn, build, id).then(
      (running) => {
        entry.running = running;
        entry.starting = undefined;
        running.process.once('exit', () => {
          clearTimeout(entry.idleTimer);
          entry.stopped = true;
          this.entries.delete(entry);
        });
        if (entry.stopped) void running.process.stop();
        else this.scheduleIdleStop(entry, fn);
        this.options.logger.info({ function: fnKey, commit: build.commit }, 'commit revision started');
        return running;
      },
      (error: unknown) => {
        entry.stopped = true;
        this.entries.delete(entry);
        throw error;
      },
    );
    return entry;
  }

  /** At the per-function limit, the least recently used revision with nothing in flight goes. */
  private makeRoom(fnKey: string): void {
    const mine = [...this.entries].filter((e) => e.fnKey === fnKey && !e.stopped);
    if (mine.length < (this.options.maxPerFunction ?? 3)) return;
    const idle = mine
      .filter((e) => e.running && this.options.board.inflightOf(e.running.activitySlot) === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed)[0];
    // All busy: one more runs for now; the idle stop brings the count back down.
    if (idle) void this.end(idle);
  }

  private scheduleIdleStop(entry: Entry, fn: SlessFunction): void {
    const idleMs = (this.options.idleSeconds?.(fn) ?? DEFAULT_IDLE_SECONDS) * 1000;
    const check = () => {
      const running = entry.running;
      if (!running || entry.stopped) return;
      const board = this.options.board;
      const idleFor = Date.now() - Math.max(board.lastActivityOf(running.activitySlot), entry.lastUsed);
      if (board.inflightOf(running.activitySlot) > 0 || idleFor < idleMs) {
        entry.idleTimer = setTimeout(check, Math.max(idleMs - idleFor, 50));
        return;
      }
      this.options.logger.info(
        { function: entry.fnKey, commit: entry.commit },
        'commit revision stopped, idle',
      );
      void this.end(entry);
    };
    entry.idleTimer = setTimeout(check, idleMs);
  }

  private async end(entry: Entry): Promise<void> {
    entry.stopped = true;
    clearTimeout(entry.idleTimer);
    this.entries.delete(entry);
    const running = entry.running ?? (await entry.starting?.catch(() => undefined));
    if (!running) return;
    await this.options.board.waitIdle(running.activitySlot, 30_000);
    await running.process.stop();
  }
}
