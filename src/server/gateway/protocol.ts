/**
 * The messages the main thread and the gateway thread exchange, in one file both sides import, so
 * that the two ends of the worker's message port cannot disagree about a message's shape.
 */
import type { ActivityBoardMemory } from '../../core/activity-board.js';
import type { CanaryCounts } from '../../core/canary.js';
import type { MirroredRoute } from '../../core/interfaces.js';
import type { ProxyTally, QueueDepth } from '../../core/proxy-tallies.js';

/** What the gateway thread is started with. */
export interface GatewayWorkerData {
  host: string;
  port: number;
  /** The main thread's private unix socket: everything the gateway does not proxy itself goes there. */
  mainSocketPath: string;
  activity: ActivityBoardMemory;
  /** The longest a streamed answer may last. */
  maxStreamMs?: number;
}

export type ToGateway =
  /** Route changes in the order they happened; `undefined`: no ready route any more. */
  | { type: 'routes'; seq: number; changes: Array<[key: string, route: MirroredRoute | undefined]> }
  | { type: 'take-tallies'; id: number }
  | { type: 'take-queues'; id: number }
  | { type: 'take-canary-counts'; id: number }
  /** Stop taking connections; let requests in flight end for up to `graceMs`, then cut them. */
  | { type: 'close'; graceMs: number };

export type FromGateway =
  | { type: 'listening'; url: string }
  | { type: 'listen-failed'; message: string; code: string | undefined }
  | { type: 'routes-applied'; seq: number }
  | { type: 'tallies'; id: number; tallies: ProxyTally[] }
  | { type: 'queues'; id: number; depths: QueueDepth[] }
  | { type: 'canary-counts'; id: number; counts: CanaryCounts[] }
  | { type: 'upstream-error'; function: string; message: string }
  | { type: 'closed' };
