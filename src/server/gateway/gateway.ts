/**
 * The main thread's side of the gateway thread, which serves `/fn/` away from the main thread's
 * garbage-collection pauses: starting it on the public port, keeping it told of each function's
 * ready route, and taking back what it reports (upstream errors, request tallies, its own failure).
 * What the thread does not proxy comes to the main thread through a private unix socket.
 */
import { existsSync, rmSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ActivityBoard } from '../../core/activity-board.js';
import type { CanaryCounts } from '../../core/canary.js';
import type { MirroredRoute, RouteMirror } from '../../core/interfaces.js';
import { OwnedTempDirs } from '../../core/owned-temp-dirs.js';
import type { ProxyTally, QueueDepth } from '../../core/proxy-tallies.js';
import { type ClientListener, EarlyListener } from '../early-listener.js';
import type { FromGateway, GatewayWorkerData, ToGateway } from './protocol.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** What the gateway tells the rest of sless after it has started. */
export interface GatewayReports {
  upstreamError(fn: string, message: string): void;
  /** The gateway thread stopped on its own: the public port is gone with it. */
  failed(error: Error): void;
}

/**
 * The worker's compiled entry. Run from TypeScript sources (the tests), the thread still needs
 * JavaScript, so it is the compiled copy in dist/ (which `npm test` builds first).
 */
function workerEntry(): string {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith('.ts')) return join(here, '..', 'worker.js');
  const [root] = here.split(`${join('/', 'src', 'server')}`);
  const compiled = join(root ?? '', 'dist', 'server', 'gateway', 'worker.js');
  if (!existsSync(compiled)) throw new Error(`the gateway thread needs ${compiled}: run npm run build`);
  return compiled;
}

const sockets = () => new OwnedTempDirs('sless-gw-');

/**
 * `/fn/` served from a worker thread of the same process. The thread owns the public port and proxies
 * requests to functions with a ready route; everything else reaches the main thread through a private
 * unix socket, where the API is served as before. The platform publishes each function's ready route
 * here (RouteMirror) and counts requests on a shared ActivityBoard, so draining and scale-to-zero see
 * the thread's requests as their own.
 */
export class Gateway implements ClientListener, RouteMirror {
  readonly activity: ActivityBoard;
  private reports: GatewayReports | undefined;
  private seq = 0;
  private appliedSeq = 0;
  private readonly waitingForSeq: Array<{ seq: number; resolve: () => void }> = [];
  /** What the thread was last told per function, so an unchanged route is not sent again. */
  private readonly published = new Map<string, MirroredRoute>();
  private pending: Array<[string, MirroredRoute | undefined]> = [];
  private tallyRequests = new Map<number, (tallies: ProxyTally[]) => void>();
  private queueRequests = new Map<number, (depths: QueueDepth[]) => void>();
  private canaryRequests = new Map<number, (counts: CanaryCounts[]) => void>();
  private nextTallyId = 0;
  /** Set once sless stops the thread on purpose: its exit is then no failure. */
  private stopping = false;
  private drained: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  private exited = false;
  /**
   * Removes the socket directory however the process ends (a start-up error exits with process.exit,
   * past every finally); only SIGKILL skips it, and the next start sweeps what a dead owner left.
   */
  private readonly removeOnExit = () => rmSync(this.socketDir, { recursive: true, force: true });

  private constructor(
    private readonly inner: EarlyListener,
    private readonly worker: Worker,
    readonly url: string,
    private readonly socketDir: string,
    activity: ActivityBoard,
  ) {
    this.activity = activity;
    process.once('exit', this.removeOnExit);
    worker.on('message', (message: FromGateway) => this.onMessage(message));
    worker.on('error', (error) => this.reports?.failed(error));
    worker.once('exit', (code) => {
      this.exited = true;
      for (const waiter of this.waitingForSeq.splice(0)) waiter.resolve();
      for (const answer of this.tallyRequests.values()) answer([]);
      this.tallyRequests.clear();
      for (const answer of this.queueRequests.values()) answer([]);
      this.queueRequests.clear();
      for (const answer of this.canaryRequests.values()) answer([]);
      this.canaryRequests.clear();
      if (!this.stopping) this.reports?.failed(new Error(`the gateway thread exited with code ${code}`));
    });
  }

  static async start(host: string, port: number, options: { maxStreamMs?: number } = {}): Promise<Gateway> {
    const dirs = sockets();
    const socketDir = await dirs.create();
    const mainSocketPath = join(socketDir, 'api.sock');
    let inner: EarlyListener | undefined;
    let worker: Worker | undefined;
    try {
      inner = await EarlyListener.relayedTo(mainSocketPath);
      const activity = new ActivityBoard();
      const data: GatewayWorkerData = {
        host,
        port,
        mainSocketPath,
        activity: activity.memory,
        ...(options.maxStreamMs ? { maxStreamMs: options.maxStreamMs } : {}),
      };
      worker = new Worker(workerEntry(), { workerData: data });
      const started = worker;
      const url = await new Promise<string>((resolve, reject) => {
        const onExit = (code: number) => reject(new Error(`the gateway thread exited with code ${code}`));
        started.once('error', reject);
        started.once('exit', onExit);
        started.on('message', function onMessage(message: FromGateway) {
          if (message.type !== 'listening' && message.type !== 'listen-failed') return;
          started.off('message', onMessage);
          started.off('error', reject);
          started.off('exit', onExit);
          if (message.type === 'listening') resolve(message.url);
          else reject(Object.assign(new Error(message.message), { code: message.code }));
        });
      });
      return new Gateway(inner, worker, url, socketDir, activity);
    } catch (error) {
      await worker?.terminate();
      await inner?.close();
      await dirs.remove(socketDir);
      throw error;
    }
  }

  /** Where upstream failures and a failure of the thread itself are reported. */
  report(reports: GatewayReports): void {
    this.reports = reports;
  }

  get server(): Server {
    return this.inner.server;
  }

  serveEarly(matches: (url: string | undefined) => boolean, handler: Handler): void {
    this.inner.serveEarly(matches, handler);
  }

  attach(handler: Handler): void {
    this.inner.attach(handler);
  }

  onUpgrade(handler: Parameters<EarlyListener['onUpgrade']>[0]): void {
    this.inner.onUpgrade(handler);
  }

  publish(key: string, route: MirroredRoute | undefined): void {
    const known = this.published.get(key);
    if (route ? sameRoute(known, route) : known === undefined) return;
    if (route) this.published.set(key, route);
    else this.published.delete(key);
    // Changes made in one turn (a restart restores many) travel in one message.
    if (this.pending.length === 0) queueMicrotask(() => this.flush());
    this.pending.push([key, route]);
  }

  synced(): Promise<void> {
    if (this.pending.length > 0) this.flush();
    const target = this.seq;
    if (this.appliedSeq >= target || this.exited) return Promise.resolve();
    return new Promise((resolve) => this.waitingForSeq.push({ seq: target, resolve }));
  }

  /** The proxy counts the thread has made since last asked; none if it does not answer in a second. */
  takeTallies(): Promise<ProxyTally[]> {
    if (this.exited) return Promise.resolve([]);
    const id = ++this.nextTallyId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.tallyRequests.delete(id);
        resolve([]);
      }, 1000);
      this.tallyRequests.set(id, (tallies) => {
        clearTimeout(timer);
        resolve(tallies);
      });
      this.send({ type: 'take-tallies', id });
    });
  }

  /** The thread's admission queues now, for the queue-depth gauge; none if it does not answer in a second. */
  queueDepths(): Promise<QueueDepth[]> {
    if (this.exited) return Promise.resolve([]);
    const id = ++this.nextTallyId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.queueRequests.delete(id);
        resolve([]);
      }, 1000);
      this.queueRequests.set(id, (depths) => {
        clearTimeout(timer);
        resolve(depths);
      });
      this.send({ type: 'take-queues', id });
    });
  }

  /** The canaries' answers the thread counted since last asked; none if it does not answer in a second. */
  takeCanaryCounts(): Promise<CanaryCounts[]> {
    if (this.exited) return Promise.resolve([]);
    const id = ++this.nextTallyId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.canaryRequests.delete(id);
        resolve([]);
      }, 1000);
      this.canaryRequests.set(id, (counts) => {
        clearTimeout(timer);
        resolve(counts);
      });
      this.send({ type: 'take-canary-counts', id });
    });
  }

  /** The public port closes; requests in flight there get up to `graceMs` to end. */
  drainClients(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    this.drained ??= this.exited
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          const onClosed = (message: FromGateway) => {
            if (message.type !== 'closed') return;
            this.worker.off('message', onClosed);
            resolve();
          };
          this.worker.on('message', onClosed);
          this.worker.once('exit', () => resolve());
          this.send({ type: 'close', graceMs });
        });
    return this.drained;
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.drainClients();
      await this.worker.terminate();
      await this.inner.close();
      process.off('exit', this.removeOnExit);
      await sockets().remove(this.socketDir);
    })();
    return this.closed;
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const changes = this.pending;
    this.pending = [];
    this.send({ type: 'routes', seq: ++this.seq, changes });
  }

  private send(message: ToGateway): void {
    if (!this.exited) this.worker.postMessage(message);
  }

  private onMessage(message: FromGateway): void {
    switch (message.type) {
      case 'routes-applied':
        this.appliedSeq = message.seq;
        // Waiters come in the order of the sequence numbers they wait for.
        while ((this.waitingForSeq[0]?.seq ?? Number.POSITIVE_INFINITY) <= message.seq)
          this.waitingForSeq.shift()?.resolve();
        return;
      case 'tallies':
        this.tallyRequests.get(message.id)?.(message.tallies);
        this.tallyRequests.delete(message.id);
        return;
      case 'queues':
        this.queueRequests.get(message.id)?.(message.depths);
        this.queueRequests.delete(message.id);
        return;
      case 'canary-counts':
        this.canaryRequests.get(message.id)?.(message.counts);
        this.canaryRequests.delete(message.id);
        return;
      case 'upstream-error':
        this.reports?.upstreamError(message.function, message.message);
        return;
      default:
        return;
    }
  }
}

function sameRoute(a: MirroredRoute | undefined, b: MirroredRoute): boolean {
  if (a?.state === 'unavailable' && b.state === 'unavailable')
    return a.status === b.status && a.message === b.message;
  if (a?.state !== 'ready' || b.state !== 'ready') return false;
  return (
    a.origin === b.origin &&
    a.socketPath === b.socketPath &&
    a.timeoutSec === b.timeoutSec &&
    a.admission?.limit === b.admission?.limit &&
    a.admission?.queue === b.admission?.queue &&
    a.revision === b.revision &&
    a.activitySlot === b.activitySlot &&
    sameList(a.endpoints, b.endpoints) &&
    a.canary?.revision === b.canary?.revision &&
    a.canary?.weight === b.canary?.weight &&
    a.canary?.since === b.canary?.since &&
    sameList(a.canary?.endpoints, b.canary?.endpoints)
  );
}

function sameList(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.length !== b.length) return false;
  return a.every((item, i) => item === b[i]);
}
