/**
 * The wire form of one replica's concurrency report to the leader (with the canary counts it took
 * since the leader last acknowledged one, see CanaryBatch), and its authentication: the JSON
 * body is signed with HMAC-SHA256 under a key only the controller replicas hold, and the leader
 * checks the signature (in constant time) before it reads a byte of the body. The body names the
 * leader it was meant for and when it was sent, so a report captured on the network cannot be
 * replayed to another leader, nor counted long after it was sent.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CanaryBatch, CanaryCounts } from './canary.js';
import { BadRequestError } from './errors.js';
import type { RecordOutcome, ReplicaReport } from './replica-concurrency.js';

/** The signature's header: `v1=<hex HMAC-SHA256 of the body>`. */
export const REPLICA_SIGNATURE_HEADER = 'x-sless-replica-signature';

/** The leader's endpoint for reports, outside /v1: replicas sign, they hold no bearer token. */
export const REPLICA_REPORT_PATH = '/internal/v1/replica-concurrency';

/** A report and the leader it was sent to. */
export interface AddressedReport extends ReplicaReport {
  leader: string;
}

/** What the leader's endpoint for reports needs of the replica it runs on. */
export interface ReplicaReportIntake {
  /** This replica's identity: a report must be addressed to it. */
  readonly identity: string;
  isLeader(): boolean;
  /** The replicas' shared key; undefined while it cannot be had (the report is a 503). */
  key(): Promise<Uint8Array | undefined>;
  /** A signature did not verify: the key may have been replaced, so it may be read again. */
  keyMismatch(): void;
  /** How far a report's send time may be from this replica's clock (bounds a replay's life). */
  readonly maxSkewMs: number;
  record(report: ReplicaReport, receivedAt: number): RecordOutcome;
}

/** Limits a well-formed report stays within (a body past them is refused, never truncated). */
export const REPORT_LIMITS = {
  functions: 10_000,
  concurrency: 1_000_000,
  name: 253,
  key: 320,
  /** Canary batches in one report: a follower keeps fewer unacknowledged (replica-reports.ts). */
  batches: 64,
  /** Canaries counted in one batch. */
  canaries: 1_000,
  /** Latencies of one canary in one batch: a tally's window. */
  latencies: 2048,
} as const;

/** Keeps the MAC of these reports apart from any other use a key might be put to. */
const DOMAIN = 'sless replica concurrency report v1\n';

function mac(key: Uint8Array, body: Uint8Array): Buffer {
  return createHmac('sha256', key).update(DOMAIN).update(body).digest();
}

export function signReport(key: Uint8Array, body: Uint8Array): string {
  return `v1=${mac(key, body).toString('hex')}`;
}

/** Whether `header` is the body's signature under `key`; equal-length digests, compared in constant time. */
export function signatureMatches(key: Uint8Array, body: Uint8Array, header: string | undefined): boolean {
  const match = /^v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match) return false;
  return timingSafeEqual(mac(key, body), Buffer.from(match[1] as string, 'hex'));
}

/** The body and its signature header value, for one report. */
export function encodeReport(key: Uint8Array, report: AddressedReport): { body: string; signature: string } {
  const body = JSON.stringify({
    replica: report.replica,
    leader: report.leader,
    sentAt: report.sentAt,
    concurrency: report.concurrency,
    ...(report.canaries?.length ? { canaries: report.canaries } : {}),
  });
  return { body, signature: signReport(key, Buffer.from(body)) };
}

function name(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > REPORT_LIMITS.name)
    throw new BadRequestError(`report: ${field} must be a name of 1 to ${REPORT_LIMITS.name} characters`);
  return value;
}

function count(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new BadRequestError(`report: ${field} must be a whole number of 0 or more`);
  return value;
}

function canaryCounts(raw: unknown): CanaryCounts {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new BadRequestError('report: a canary count must be an object');
  const { key, revision, since, requests, errors, latencies } = raw as Record<string, unknown>;
  if (typeof key !== 'string' || key.length > REPORT_LIMITS.key || !/^[^/]+\/[^/]+$/.test(key))
    throw new BadRequestError('report: a canary count must name its function as namespace/name');
  const counted = { requests: count(requests, 'requests'), errors: count(errors, 'errors') };
  if (counted.errors > counted.requests)
    throw new BadRequestError('report: a canary count has more errors than requests');
  if (
    !Array.isArray(latencies) ||
    latencies.length > REPORT_LIMITS.latencies ||
    !latencies.every((ms) => typeof ms === 'number' && Number.isFinite(ms) && ms >= 0)
  )
    throw new BadRequestError(
      `report: a canary count's latencies must be at most ${REPORT_LIMITS.latencies} milliseconds of 0 or more`,
    );
  if (count(since, 'since') === 0) throw new BadRequestError('report: since must be positive');
  return { key, revision: name(revision, 'revision'), since: since as number, ...counted, latencies };
}

/** The batches in order of `seq`, which strictly increases: the leader skips what it absorbed. */
function canaryBatches(raw: unknown): CanaryBatch[] {
  if (!Array.isArray(raw) || raw.length > REPORT_LIMITS.batches)
    throw new BadRequestError(`report: canaries must be a list of at most ${REPORT_LIMITS.batches} batches`);
  let last = 0;
  return raw.map((batch: unknown) => {
    const { seq, counts } = (typeof batch === 'object' && batch !== null ? batch : {}) as Record<
      string,
      unknown
    >;
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq <= last)
      throw new BadRequestError('report: canary batches must have positive, strictly increasing seq');
    last = seq;
    if (!Array.isArray(counts) || counts.length > REPORT_LIMITS.canaries)
      throw new BadRequestError(`report: a canary batch holds at most ${REPORT_LIMITS.canaries} counts`);
    return { seq, counts: counts.map(canaryCounts) };
  });
}

/** Reads a body whose signature verified; a malformed one is a BadRequestError saying what is wrong. */
export function parseReport(body: Uint8Array): AddressedReport {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw new BadRequestError('report: the body is not JSON');
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new BadRequestError('report: the body must be an object');
  const { replica, leader, sentAt, concurrency, canaries } = raw as Record<string, unknown>;
  if (typeof sentAt !== 'number' || !Number.isSafeInteger(sentAt) || sentAt <= 0)
    throw new BadRequestError('report: sentAt must be a positive integer (milliseconds)');
  if (typeof concurrency !== 'object' || concurrency === null || Array.isArray(concurrency))
    throw new BadRequestError('report: concurrency must be an object of function to in-flight average');
  const entries = Object.entries(concurrency as Record<string, unknown>);
  if (entries.length > REPORT_LIMITS.functions)
    throw new BadRequestError(`report: more than ${REPORT_LIMITS.functions} functions`);
  const counts: Record<string, number> = {};
  for (const [key, value] of entries) {
    if (key.length > REPORT_LIMITS.key || !/^[^/]+\/[^/]+$/.test(key))
      throw new BadRequestError('report: a function key must be namespace/name');
    if (
      typeof value !== 'number' ||
      !Number.isFinite(value) ||
      value < 0 ||
      value > REPORT_LIMITS.concurrency
    )
      throw new BadRequestError(
        `report: ${key}'s in-flight average must be within 0 to ${REPORT_LIMITS.concurrency}`,
      );
    counts[key] = value;
  }
  const batches = canaries === undefined ? [] : canaryBatches(canaries);
  return {
    replica: name(replica, 'replica'),
    leader: name(leader, 'leader'),
    sentAt,
    concurrency: counts,
    ...(batches.length > 0 ? { canaries: batches } : {}),
  };
}
