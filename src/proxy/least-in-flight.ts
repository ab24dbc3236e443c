/**
 * Which of a function's instances gets the next request: the one with the fewest of this proxy's
 * requests in flight, ties taken in turn. Both `/fn/` paths (the main thread and the gateway thread)
 * pick with this, so they spread the same way. It exists because kept-alive connections to one
 * address that fronts every instance (a kube Service) stay with the instance they first reached:
 * balancing connections is not balancing requests, so the proxy balances requests itself.
 */
import type { EndpointPicker } from '../core/interfaces.js';

export class LeastInFlight implements EndpointPicker {
  private endpoints: readonly string[];
  /** Requests in flight by origin, for every origin with any (removed ones too, until they end). */
  private readonly inFlight = new Map<string, number>();
  /** Where the next scan starts: after the last pick, so equals are taken in turn. */
  private cursor = 0;

  constructor(endpoints: readonly string[]) {
    this.endpoints = endpoints;
  }

  /**
   * The instances from now on. Requests in flight stay counted against their origin: one that is
   * still listed keeps its count, one that is not is never picked again.
   */
  update(endpoints: readonly string[]): void {
    if (endpoints === this.endpoints) return;
    this.endpoints = endpoints;
    if (this.cursor >= endpoints.length) this.cursor = 0;
  }

  acquire(): string | undefined {
    const list = this.endpoints;
    const size = list.length;
    if (size === 0) return undefined;
    let best = 0;
    let fewest = Number.POSITIVE_INFINITY;
    for (let step = 0, index = this.cursor; step < size; step++, index = index + 1 === size ? 0 : index + 1) {
      const count = this.inFlight.get(list[index] as string) ?? 0;
      if (count < fewest) {
        fewest = count;
        best = index;
        if (count === 0) break;
      }
    }
    const origin = list[best] as string;
    this.inFlight.set(origin, fewest + 1);
    this.cursor = best + 1 === size ? 0 : best + 1;
    return origin;
  }

  release(origin: string): void {
    const count = this.inFlight.get(origin);
    if (count === undefined) return;
    if (count <= 1) this.inFlight.delete(origin);
    else this.inFlight.set(origin, count - 1);
  }

  /** This proxy's requests in flight to `origin` now. */
  inFlightOf(origin: string): number {
    return this.inFlight.get(origin) ?? 0;
  }
}

/**
 * One picker per function, kept across route changes so that its counts survive a new endpoint list
 * (a pod added or gone); dropped once the function has no endpoints to pick from.
 */
export class EndpointPickers {
  private readonly pickers = new Map<string, LeastInFlight>();

  /** The function's picker, told `endpoints` (a list seen before costs one comparison). */
  of(key: string, endpoints: readonly string[]): LeastInFlight {
    let picker = this.pickers.get(key);
    if (picker) picker.update(endpoints);
    else {
      picker = new LeastInFlight(endpoints);
      this.pickers.set(key, picker);
    }
    return picker;
  }

  /** Requests still in flight keep their picker (they release on it); new ones get a new one. */
  drop(key: string): void {
    this.pickers.delete(key);
  }

  get(key: string): LeastInFlight | undefined {
    return this.pickers.get(key);
  }
}
