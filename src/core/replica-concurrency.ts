/**
 * The leader's view of the in-flight requests other controller replicas counted: per replica, its
 * latest report (each function's time-weighted in-flight average over the reporter's last tick) and
 * when it arrived. The decision's input for a function is the sum over the replicas whose latest
 * report is still fresh, so a replica that dies (or stops being able to reach the leader) stops
 * counting a few report intervals later, and one that comes back counts again from its next report.
 * Pure: reports and the time come in, sums go out.
 */
import type { CanaryBatch } from './canary.js';

export interface ReplicaReport {
  /** The reporting replica's identity (its name as a Lease candidate). */
  replica: string;
  /**
   * When the replica sent it, by its own clock, strictly increasing over the reports one replica
   * sends: a report that is not newer than the one held is a duplicate or came out of order.
   */
  sentAt: number;
  /** In-flight average by function key (`namespace/name`); a function left out had none. */
  concurrency: Readonly<Record<string, number>>;
  /** The canary counts the replica took and the leader has not acknowledged, oldest first. */
  canaries?: readonly CanaryBatch[];
}

export type RecordOutcome = 'applied' | 'superseded';

interface Held {
  sentAt: number;
  receivedAt: number;
  concurrency: Readonly<Record<string, number>>;
}

export class ReplicaConcurrency {
  private readonly latest = new Map<string, Held>();

  /** @param freshForMs how long a report counts after it arrived (about three report intervals). */
  constructor(private readonly freshForMs: number) {}

  private fresh(held: Held, now: number): boolean {
    return now - held.receivedAt < this.freshForMs;
  }

  /**
   * Keeps the report unless the replica's report held is newer or the same one. A held report that
   * is no longer fresh never blocks a new one: a replica whose clock stepped back counts again.
   */
  record(report: ReplicaReport, receivedAt: number): RecordOutcome {
    const held = this.latest.get(report.replica);
    if (held && this.fresh(held, receivedAt) && report.sentAt <= held.sentAt) return 'superseded';
    this.latest.set(report.replica, {
      sentAt: report.sentAt,
      receivedAt,
      concurrency: report.concurrency,
    });
    return 'applied';
  }

  /**
   * The sum over fresh reports of each function asked for (0 where none counted it); reports past
   * their freshness are forgotten. A function a report names but that is not asked for (it no
   * longer autoscales) adds to nothing.
   */
  totals(now: number, functions: Iterable<string>): Map<string, number> {
    const sums = new Map<string, number>();
    for (const key of functions) sums.set(key, 0);
    for (const [replica, held] of this.latest) {
      if (!this.fresh(held, now)) {
        this.latest.delete(replica);
        continue;
      }
      for (const [key, value] of Object.entries(held.concurrency)) {
        const total = sums.get(key);
        if (total !== undefined) sums.set(key, total + value);
      }
    }
    return sums;
  }

  /** The replicas whose reports count now, sorted. */
  replicas(now: number): string[] {
    return [...this.latest]
      .filter(([, held]) => this.fresh(held, now))
      .map(([replica]) => replica)
      .sort();
  }

  /** Forgets every report: a new term as leader starts from its own counts. */
  clear(): void {
    this.latest.clear();
  }
}
