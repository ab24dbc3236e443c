/**
 * Concurrency reports between controller replicas, as Knative's activators report to its
 * autoscaler: every replica serves /fn/ and samples its own in-flight requests each autoscaler tick;
 * a follower sends its samples to the leader (at the URL the leader advertises on the Lease), signed
 * with the replicas' shared key, and the leader adds the fresh reports it holds to its own samples.
 * A report is sent only while it says something: when a replica's load is gone it sends one empty
 * report, then none until it has load again (a report it no longer renews expires at the leader).
 * At most one report is on its way at a time; a tick that finds one still going sends nothing.
 */
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import type { Leadership } from '../../core/leadership.js';
import {
  type RecordOutcome,
  ReplicaConcurrency,
  type ReplicaReport,
} from '../../core/replica-concurrency.js';
import {
  encodeReport,
  REPLICA_REPORT_PATH,
  REPLICA_SIGNATURE_HEADER,
  type ReplicaReportIntake,
} from '../../core/replica-report.js';
import type { KubeHttp } from './http.js';
import { ReplicaKey } from './replica-key.js';

export interface ReplicaReportsOptions {
  http: KubeHttp;
  logger: Logger;
  /** The controller namespace, where the key's Secret is. */
  namespace: string;
  /** The Secret holding the replicas' key (created when missing). */
  keySecret: string;
  /** This replica's identity on the Lease. */
  identity: string;
  /** Who leads, and the URL the leader advertises on the Lease. */
  leader: Leadership & { leaderUrl(): string | undefined };
  /** How often reports are sent (the autoscaler's tick); a report counts for three of these. */
  intervalMs: number;
  /** Where the key comes from: the Secret `keySecret` unless given (tests). */
  key?: KeySource;
}

/** The replicas' key as ReplicaKey keeps it. */
export type KeySource = Pick<ReplicaKey, 'get' | 'mismatch'>;

/** How far a report's send time may be from the leader's clock: replicas' clocks follow NTP. */
const MAX_SKEW_MS = 30_000;

export class ReplicaReports implements ReplicaReportIntake {
  readonly identity: string;
  readonly maxSkewMs = MAX_SKEW_MS;
  private readonly options: ReplicaReportsOptions;
  private readonly peers: ReplicaConcurrency;
  private readonly replicaKey: KeySource;
  private lastSentAt = 0;
  private sending = false;
  /** The last report delivered named some function: the next, even empty, must be sent. */
  private leaderHoldsLoad = false;
  private problem: string | undefined;

  constructor(options: ReplicaReportsOptions) {
    this.options = options;
    this.identity = options.identity;
    this.peers = new ReplicaConcurrency(3 * options.intervalMs);
    this.replicaKey =
      options.key ??
      new ReplicaKey({
        http: options.http,
        logger: options.logger,
        namespace: options.namespace,
        name: options.keySecret,
        identity: options.identity,
      });
  }

  isLeader(): boolean {
    return this.options.leader.isLeader();
  }

  key(): Promise<Uint8Array | undefined> {
    return this.replicaKey.get();
  }

  keyMismatch(): void {
    this.replicaKey.mismatch();
  }

  record(report: ReplicaReport, receivedAt: number): RecordOutcome {
    return this.peers.record(report, receivedAt);
  }

  /** What the other replicas count now for each function asked for (the leader's addition). */
  totals(now: number, functions: Iterable<string>): Map<string, number> {
    return this.peers.totals(now, functions);
  }

  /** A term as leader begins or ends: no report of another term counts in it. */
  clear(): void {
    this.peers.clear();
  }

  /**
   * One tick's own samples, by function key: sent to the leader unless this replica leads. Returns
   * the delivery when one starts (nobody needs to wait for it; it never rejects).
   */
  send(own: ReadonlyMap<string, number>, now: number): Promise<void> | undefined {
    const { leader } = this.options;
    if (leader.isLeader() || this.sending) return;
    const concurrency: Record<string, number> = {};
    for (const [key, value] of own) if (value > 0) concurrency[key] = value;
    const named = Object.keys(concurrency).length > 0;
    if (!named && !this.leaderHoldsLoad) return;
    const url = leader.leaderUrl();
    const holder = leader.info().holder;
    if (!url || !holder || holder === this.identity) return;
    // Strictly increasing, across restarts too: the leader drops a report not newer than the last.
    this.lastSentAt = Math.max(now, this.lastSentAt + 1);
    const report = { replica: this.identity, leader: holder, sentAt: this.lastSentAt, concurrency };
    this.sending = true;
    return this.deliver(new URL(REPLICA_REPORT_PATH, url), report, named).finally(() => {
      this.sending = false;
    });
  }

  private async deliver(url: URL, report: ReplicaReport & { leader: string }, named: boolean): Promise<void> {
    try {
      const key = await this.replicaKey.get();
      if (!key) return this.trouble('no key', 'the replicas’ key cannot be read');
      const { body, signature } = encodeReport(key, report);
      const answer = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [REPLICA_SIGNATURE_HEADER]: signature },
        body,
        signal: AbortSignal.timeout(Math.max(2 * this.options.intervalMs, 1000)),
      });
      const text = await answer.text();
      if (answer.status === 401) this.replicaKey.mismatch();
      if (!answer.ok)
        return this.trouble(
          `status ${answer.status}`,
          `the leader answered ${answer.status}: ${text.slice(0, 200)}`,
        );
      this.leaderHoldsLoad = named;
      if (this.problem !== undefined)
        this.options.logger.info({ leader: report.leader }, 'concurrency reports reach the leader again');
      this.problem = undefined;
    } catch (error) {
      const why = asError(error).message;
      this.trouble(`unreachable ${url.origin}`, `cannot reach the leader at ${url.origin}: ${why}`);
    }
  }

  /** Logged when a kind of failure first happens, not once per tick. */
  private trouble(kind: string, problem: string): void {
    if (kind !== this.problem)
      this.options.logger.warn({ problem }, 'concurrency report not delivered; the leader scales without it');
    this.problem = kind;
  }
}
