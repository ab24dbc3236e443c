/**
 * Starting one revision of a function: its unix socket in a directory of its own, its secret files,
 * the sandboxed runtime process up to /healthz, and its slot on the ActivityBoard, with the route
 * object every request to it is given. Removes what it made when a start fails or the process exits.
 */

import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ActivityBoard } from '../../core/activity-board.js';
import { timeoutSecOf } from '../../core/defaults.js';
import type { ProcessLauncher, RouteState } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import { OwnedTempDirs } from '../../core/owned-temp-dirs.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { admissionOf } from '../../proxy/admission.js';
import type { FunctionLogBuffer } from './function-logs.js';
import type { RuntimeCommands } from './runtime-commands.js';
import { type RuntimeCommand, RuntimeProcess } from './runtime-process.js';
import { SecretFiles, type SecretSource } from './secret-files.js';

export interface Revision {
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

export type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

export interface RevisionStarterOptions {
  logger: Logger;
  launcher: ProcessLauncher;
  commands: RuntimeCommands;
  board: ActivityBoard;
  logs?: FunctionLogBuffer;
  secrets?: SecretSource;
  startTimeoutMs?: number;
  /** A revision's process exited: its activity slot may be freed once nothing counts in it. */
  onExit(key: string, activitySlot: number): void;
}

export class RevisionStarter {
  private readonly options: RevisionStarterOptions;
  /**
   * One directory per function process, holding its unix socket: in the system's temp directory,
   * because a socket path must stay under 108 bytes wherever the state directory is.
   */
  private readonly sockets = new OwnedTempDirs('sless-fn-');
  /** Each process's secret files, in memory where the machine has /dev/shm, never in the state dir. */
  private readonly secretFiles = new SecretFiles();

  constructor(options: RevisionStarterOptions) {
    this.options = options;
  }

  async start(fn: SlessFunction, build: BuildRecord, id: string, launched?: () => void): Promise<Revision> {
    const logger = this.options.logger.child({
      function: objectKey(fn.metadata.namespace, fn.metadata.name),
      revision: id,
    });
    // Each process serves on a unix socket in a directory of its own, the only place it may write: a
    // sandboxed function has its own network namespace, where a port would be out of reach.
    const socketDir = await this.sockets.create();
    await this.options.launcher.grant(fn.metadata.namespace, socketDir);
    let command: RuntimeCommand;
    let secretDir: string | undefined;
    try {
      command = this.options.commands.commandFor(fn, build);
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
    const activitySlot = this.options.board.allocate();
    if (activitySlot === undefined) {
      await process.stop();
      throw new Error('too many revisions alive at once to count their requests');
    }
    process.once('exit', () => this.options.onExit(objectKey(namespace, name), activitySlot));
    const board = this.options.board;
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
        timeoutSec: timeoutSecOf(fn),
        // One process per function here.
        ...admissionOf(fn.spec.scale, 1),
        // Called once per resolve (the proxy and the cron scheduler each release what they resolved).
        release: () => board.end(activitySlot),
      },
    };
    return revision;
  }

  /** Once every process has stopped: what is left of their sockets and secret files goes. */
  async removeAll(): Promise<void> {
    await this.sockets.removeAll();
    await this.secretFiles.removeAll();
  }
}
