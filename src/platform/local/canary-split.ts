/**
 * The local platform's traffic split during a canary: which request goes to the new revision (exactly
 * `weight` of every hundred, spread evenly rather than drawn at random, so a step's share holds over
 * a few hundred requests already), and the tally of the new revision's answers that judges it.
 */
import { AnswerTally } from '../../core/canary.js';
import type { RouteState } from '../../core/interfaces.js';

type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

export class CanarySplit<R extends { route: ReadyRoute }> {
  readonly tally = new AnswerTally();
  /** The new revision's route, counting each answer in the tally. */
  readonly route: ReadyRoute;
  private credit = 0;
  /** When the share was last set: at the start, then at each step. */
  private setAt = Date.now();

  constructor(
    readonly revision: R,
    private share: number,
  ) {
    this.route = { ...revision.route, observe: (status, ms) => this.tally.record(status, ms) };
  }

  get weight(): number {
    return this.share;
  }

  get since(): number {
    return this.setAt;
  }

  /** True when the next request goes to the new revision. */
  takesNext(): boolean {
    this.credit += this.share;
    if (this.credit < 100) return false;
    this.credit -= 100;
    return true;
  }

  /** A new step: a new share, and figures counted from now. */
  setWeight(weight: number): void {
    this.share = weight;
    this.setAt = Date.now();
    this.tally.reset();
  }
}
