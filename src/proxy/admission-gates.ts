/**
 * The admission gates of one proxy (one thread), per function with a concurrency limit, shared by
 * its requests and its WebSocket upgrades so that an open socket holds a slot as a request in flight
 * does: the wait in the queue bounded by the function's timeout, a client that leaves the queue
 * taken out of it, and each gate dropped once nothing is in flight or waiting.
 */
import type { AdmissionLimits } from '../core/interfaces.js';
import { objectKey, splitObjectKey } from '../core/object-key.js';
import type { QueueDepth } from '../core/proxy-tallies.js';
import { AdmissionGate } from './admission.js';

/** What is admitted: a response or a socket, which closes once when it ends, however it ends. */
export interface AdmittedClient {
  readonly destroyed: boolean;
  on(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

export interface AdmissionOutcomes {
  /** Admitted: send it on. Its slot is held until the client closes. */
  start(): void;
  /** Not admitted: its queue is full, or it waited `waitMs`. The caller answers 503 with `message`. */
  turnAway(message: string): void;
  /** The client went away before it was sent on (queued, or just as it was admitted). */
  left(): void;
}

export class AdmissionGates {
  private readonly gates = new Map<string, AdmissionGate>();

  /**
   * Sends `client` on once the function's gate admits it: at once below its limit, after those
   * queued before it otherwise, or never (turned away now) when its queue is full.
   */
  admit(
    ns: string,
    name: string,
    limits: AdmissionLimits,
    waitMs: number,
    client: AdmittedClient,
    outcomes: AdmissionOutcomes,
  ): void {
    const key = objectKey(ns, name);
    let gate = this.gates.get(key);
    if (gate) gate.update(limits);
    else {
      gate = new AdmissionGate(limits);
      this.gates.set(key, gate);
    }
    const admitted = gate;
    const forget = () => {
      if (admitted.idle && this.gates.get(key) === admitted) this.gates.delete(key);
    };
    const ended = () => {
      admitted.done();
      forget();
    };
    const start = () => {
      if (client.destroyed) {
        outcomes.left();
        ended();
        return;
      }
      client.on('close', ended);
      outcomes.start();
    };
    // Called only from a later done() or update(), never within request(): `gone` and `timer` exist.
    const admission = gate.request(() => {
      clearTimeout(timer);
      client.off('close', gone);
      start();
    });
    if (admission.outcome === 'admitted') {
      start();
      return;
    }
    if (admission.outcome === 'rejected') {
      forget();
      outcomes.turnAway(
        `function ${key} is at its concurrency limit: ${limits.limit} in flight and ${limits.queue} queued; try again`,
      );
      return;
    }
    // A client that goes away leaves the queue; one that waits as long as the function may run is
    // told so rather than held on.
    const gone = () => {
      clearTimeout(timer);
      admission.leave();
      outcomes.left();
      forget();
    };
    client.on('close', gone);
    const timer = setTimeout(() => {
      admission.leave();
      client.off('close', gone);
      forget();
      outcomes.turnAway(
        `function ${key} had no free instance within ${waitMs / 1000}s (${limits.limit} in flight at most); try again`,
      );
    }, waitMs);
  }

  /** In flight through this proxy for the function now (requests and open sockets). */
  inFlight(ns: string, name: string): number {
    return this.gates.get(objectKey(ns, name))?.active ?? 0;
  }

  /** The functions with requests queued here now; a function absent has none. */
  queueDepths(): QueueDepth[] {
    const depths: QueueDepth[] = [];
    for (const [key, gate] of this.gates) {
      if (gate.queued === 0) continue;
      const { namespace, name } = splitObjectKey(key);
      depths.push({ namespace, function: name, depth: gate.queued });
    }
    return depths;
  }
}
