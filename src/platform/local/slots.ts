/**
 * What the local platform holds per function (its slot: the serving revision, a parked one, crash
 * counts) and the answers a request gets when no revision can take it.
 */
import type { UnavailableRoute } from '../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import type { CanarySplit } from './canary-split.js';
import type { Revision } from './revisions.js';

export interface Slot {
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
  /** A new revision beside `current`, taking its share of requests while it is judged. */
  canary?: CanarySplit<Revision>;
}

export function disabled(namespace: string, name: string): UnavailableRoute {
  return { state: 'unavailable', status: 503, message: `function ${namespace}/${name} is disabled` };
}

export function restartingAfterCrash(namespace: string, name: string): UnavailableRoute {
  return {
    state: 'unavailable',
    status: 503,
    message: `function ${namespace}/${name} is restarting after a crash`,
  };
}
