/**
 * What the systems and the data paths need of the proxy thread (the gateway), as a type only, so
 * nothing of the thread loads where it is named.
 */
import type { ActivityBoard } from './activity-board.js';
import type { CanaryCounts } from './canary.js';
import type { RouteMirror } from './interfaces.js';
import type { ProxyTally, QueueDepth } from './proxy-tallies.js';

export interface ProxyThread extends RouteMirror {
  readonly activity: ActivityBoard;
  takeTallies(): Promise<ProxyTally[]>;
  /** Optional: a stand-in thread without admission queues reports none. */
  queueDepths?(): Promise<QueueDepth[]>;
  /** The canaries' answers the thread counted since last asked; optional as queueDepths is. */
  takeCanaryCounts?(): Promise<CanaryCounts[]>;
}
