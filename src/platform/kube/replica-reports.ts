/**
 * Concurrency reports between controller replicas, as Knative's activators report to its
 * autoscaler: every replica serves /fn/ and samples its own in-flight requests each autoscaler tick;
 * a follower sends its samples to the leader (at the URL the leader advertises on the Lease), signed
 * with the replicas' shared key, and the leader adds the fresh reports it holds to its own samples.
 * A report is sent only while it says something: when a replica's load is gone it sends one empty
 * report, then none until it has load again (a report it no longer renews expires at the leader).
 * At most one report is on its way at a time; a tick that finds one still going sends nothing.
 *
 * A report also carries the canary answers the follower's proxies counted (the leader judges every
 * canary, see canaries.ts). Each tick's take is a batch with a strictly increasing `seq`; the
 * follower sends every batch the leader has not acknowledged with a 200, so counts of a report that
 * failed go in the next one, and the leader absorbs each batch once, skipping a seq it already
 * absorbed (a report resent, duplicated, or arriving after a later one). Losses are bounded: past
 * MAX_PENDING_BATCHES unacknowledged the oldest are dropped, and a report the leader refuses as
 * malformed or too large (400, 413) drops its batches; both are logged. Counts sent to a leader of
 * another term name another canary step, and its KubeCanaries drops them.
 */
import type { Logger } from 'pino';
import type { CanaryBatch, CanaryCounts } from '../../core/canary.js';
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
  /** What this replica's proxies counted of canaries since last asked; sent while following. */
  takeCanaryCounts?: () => Promise<CanaryCounts[]>;
}

/** The replicas' key as ReplicaKey keeps it. */
export type KeySource = Pick<ReplicaKey, 'get' | 'mismatch'>;

/** How far a report's send time may be from the leader's clock: replicas' clocks follow NTP. */
const MAX_SKEW_MS = 30_000;
/** Canary batches a follower keeps unacknowledged: about this many report intervals of them. */
export const MAX_PENDING_BATCHES = 30;
/** Distinct canary steps the leader holds counts of between two takes (a bound, never reached in use). */
const MAX_RECEIVED = 1000;
/** Latencies kept per canary step received: an AnswerTally's window. */
const MAX_LATENCIES = 2048;

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
  /** Following: the canary batches taken and not acknowledged yet, oldest first. */
  private pending: CanaryBatch[] = [];
  private lastBatch = 0;
  /** Leading: per replica, the highest batch seq absorbed this term. */
  private readonly absorbedThrough = new Map<string, number>();
  /** Leading: the followers' canary counts absorbed and not taken yet, by key, revision and step. */
  private received = new Map<string, CanaryCounts>();

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

  /** Keeps the report's concurrency, and absorbs each of its canary batches not absorbed before. */
  record(report: ReplicaReport, receivedAt: number): RecordOutcome {
    const outcome = this.peers.record(report, receivedAt);
    let through = this.absorbedThrough.get(report.replica) ?? 0;
    for (const batch of report.canaries ?? []) {
      if (batch.seq <= through) continue;
      through = batch.seq;
      for (const counts of batch.counts) this.receive(counts);
    }
    if (through > 0) this.absorbedThrough.set(report.replica, through);
    return outcome;
  }

  /** The followers' canary counts absorbed since last asked (the leader's KubeCanaries adds them). */
  takeReceived(): CanaryCounts[] {
    const taken = [...this.received.values()];
    this.received = new Map();
    return taken;
  }

  private receive(counts: CanaryCounts): void {
    const id = `${counts.key}\n${counts.revision}\n${counts.since}`;
    const held = this.received.get(id);
    if (!held) {
      if (this.received.size < MAX_RECEIVED)
        this.received.set(id, { ...counts, latencies: [...counts.latencies] });
      return;
    }
    held.requests += counts.requests;
    held.errors += counts.errors;
    held.latencies = [...held.latencies, ...counts.latencies].slice(-MAX_LATENCIES);
  }

  /** What the other replicas count now for each function asked for (the leader's addition). */
  totals(now: number, functions: Iterable<string>): Map<string, number> {
    return this.peers.totals(now, functions);
  }

  /** A term as leader begins or ends: no report of another term counts in it. */
  clear(): void {
    this.peers.clear();
    this.absorbedThrough.clear();
    this.received = new Map();
  }

  /**
   * One tick's own samples, by function key: sent to the leader unless this replica leads. Returns
   * the delivery when one starts (nobody needs to wait for it; it never rejects).
   */
  send(own: ReadonlyMap<string, number>, now: number): Promise<void> | undefined {
    const { leader, takeCanaryCounts } = this.options;
    if (leader.isLeader() || this.sending) return;
    const concurrency: Record<string, number> = {};
    for (const [key, value] of own) if (value > 0) concurrency[key] = value;
    const named = Object.keys(concurrency).length > 0;
    const due = () => named || this.leaderHoldsLoad || this.pending.length > 0;
    // Without canary counts to take, whether a report goes is known now.
    if (!takeCanaryCounts && !due()) return;
    const url = leader.leaderUrl();
    const holder = leader.info().holder;
    if (!url || !holder || holder === this.identity) return;
    this.sending = true;
    return (async () => {
      if (takeCanaryCounts) this.queue(await takeCanaryCounts().catch(() => []), now);
      if (!due()) return;
      // Strictly increasing, across restarts too: the leader drops a report not newer than the last.
      this.lastSentAt = Math.max(now, this.lastSentAt + 1);
      const report: ReplicaReport & { leader: string } = {
        replica: this.identity,
        leader: holder,
        sentAt: this.lastSentAt,
        concurrency,
        ...(this.pending.length > 0 ? { canaries: [...this.pending] } : {}),
      };
      await this.deliver(new URL(REPLICA_REPORT_PATH, url), report, named);
    })().finally(() => {
      this.sending = false;
    });
  }

  /** One take of canary counts becomes a batch; past the bound the oldest batch is dropped. */
  private queue(counts: CanaryCounts[], now: number): void {
    if (counts.length === 0) return;
    this.lastBatch = Math.max(now, this.lastBatch + 1);
    this.pending.push({ seq: this.lastBatch, counts });
    if (this.pending.length <= MAX_PENDING_BATCHES) return;
    const [dropped] = this.pending.splice(0, this.pending.length - MAX_PENDING_BATCHES);
    this.lost('the leader has not acknowledged them for too long', dropped ? [dropped] : []);
  }

  /** Batches the leader will never absorb: their answers are missing from its canaries' figures. */
  private lost(why: string, batches: readonly CanaryBatch[]): void {
    const requests = batches.reduce((sum, b) => sum + b.counts.reduce((n, c) => n + c.requests, 0), 0);
    if (requests > 0)
      this.options.logger.warn(
        { requests, why },
        'canary answers counted here dropped before the leader had them',
      );
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
      const sent = report.canaries ?? [];
      const lastSeq = sent.at(-1)?.seq ?? 0;
      // Acknowledged, or refused for what it is (resending cannot help): these batches are done.
      if (answer.ok || answer.status === 400 || answer.status === 413) {
        this.pending = this.pending.filter((batch) => batch.seq > lastSeq);
        if (!answer.ok) this.lost(`the leader refused the report (${answer.status})`, sent);
      }
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
