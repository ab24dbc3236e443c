/**
 * A follower's side of the concurrency reports, against a real HTTP server playing the leader: what
 * is sent and when (only while it says something, never while leading or with no leader known, one
 * at a time), that it is signed with the replicas' key and its send times strictly increase, and that
 * a 401 makes the key be read again. Canary counts: a follower sends each take as a batch until the
 * leader acknowledges it (a failed report's batches go in the next one, at most MAX_PENDING_BATCHES
 * of them, and a refused one's are dropped); the leader absorbs each batch once, however often and in
 * whatever order it arrives, and hands what it absorbed to its canaries once.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CanaryCounts } from '../../core/canary.js';
import type { LeaderInfo } from '../../core/leadership.js';
import {
  parseReport,
  REPLICA_REPORT_PATH,
  REPLICA_SIGNATURE_HEADER,
  signatureMatches,
} from '../../core/replica-report.js';
import type { KubeHttp } from './http.js';
import { MAX_PENDING_BATCHES, ReplicaReports } from './replica-reports.js';

const KEY = Buffer.alloc(32, 3);

interface Received {
  path: string | undefined;
  signed: boolean;
  body: ReturnType<typeof parseReport>;
}

describe('ReplicaReports, sending', () => {
  let server: Server;
  let url: string;
  let received: Received[];
  /** How the leader answers; `hold` keeps the answer until released. */
  let answer: { status: number; hold?: Promise<void> };
  let leading: boolean;
  let holder: string | undefined;
  let mismatches: number;

  beforeEach(async () => {
    received = [];
    answer = { status: 200 };
    leading = false;
    holder = 'replica-a';
    mismatches = 0;
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', async () => {
        const body = Buffer.concat(chunks);
        const header = req.headers[REPLICA_SIGNATURE_HEADER];
        received.push({
          path: req.url,
          signed: signatureMatches(KEY, body, Array.isArray(header) ? header[0] : header),
          body: parseReport(body),
        });
        await answer.hold;
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end('{"applied":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const reports = (takeCanaryCounts?: () => Promise<CanaryCounts[]>) =>
    new ReplicaReports({
      ...(takeCanaryCounts ? { takeCanaryCounts } : {}),
      http: {} as KubeHttp,
      logger: pino({ level: 'silent' }),
      namespace: 'sless-system',
      keySecret: 'sless-replica-key',
      identity: 'replica-b',
      leader: {
        isLeader: () => leading,
        info: (): LeaderInfo => ({ identity: 'replica-b', holder, isLeader: leading }),
        leaderUrl: () => (holder ? url : undefined),
      },
      intervalMs: 1000,
      key: {
        get: async () => KEY,
        mismatch: () => {
          mismatches++;
        },
      },
    });
  const load = (entries: Record<string, number>) => new Map(Object.entries(entries));

  it('sends what it counted, signed and addressed to the leader, then one empty report when the load is gone, then nothing', async () => {
    const sender = reports();
    await sender.send(load({ 'ns/a': 2.5, 'ns/b': 0 }), 1_000_000);
    await sender.send(load({ 'ns/a': 0, 'ns/b': 0 }), 1_001_000);
    expect(sender.send(load({ 'ns/a': 0, 'ns/b': 0 }), 1_002_000)).toBeUndefined();
    expect(sender.send(load({}), 1_003_000)).toBeUndefined();
    await sender.send(load({ 'ns/b': 1 }), 1_004_000);
    expect(received).toEqual([
      {
        path: REPLICA_REPORT_PATH,
        signed: true,
        body: { replica: 'replica-b', leader: 'replica-a', sentAt: 1_000_000, concurrency: { 'ns/a': 2.5 } },
      },
      {
        path: REPLICA_REPORT_PATH,
        signed: true,
        body: { replica: 'replica-b', leader: 'replica-a', sentAt: 1_001_000, concurrency: {} },
      },
      {
        path: REPLICA_REPORT_PATH,
        signed: true,
        body: { replica: 'replica-b', leader: 'replica-a', sentAt: 1_004_000, concurrency: { 'ns/b': 1 } },
      },
    ]);
  });

  it('sends nothing while it leads or while no leader is known', async () => {
    const sender = reports();
    leading = true;
    holder = 'replica-b';
    expect(sender.send(load({ 'ns/a': 1 }), 1_000_000)).toBeUndefined();
    leading = false;
    holder = undefined;
    expect(sender.send(load({ 'ns/a': 1 }), 1_001_000)).toBeUndefined();
    // Positive signal: once a leader is known the next tick is sent, and it is the only report.
    holder = 'replica-a';
    await sender.send(load({ 'ns/a': 1 }), 1_002_000);
    expect(received.map((r) => r.body.sentAt)).toEqual([1_002_000]);
  });

  it('keeps one report on its way at a time, and its send times strictly increase', async () => {
    const sender = reports();
    let release: () => void = () => undefined;
    answer = {
      status: 200,
      hold: new Promise<void>((resolve) => {
        release = resolve;
      }),
    };
    const first = sender.send(load({ 'ns/a': 1 }), 1_000_000);
    expect(first).toBeDefined();
    expect(sender.send(load({ 'ns/a': 2 }), 1_000_000)).toBeUndefined();
    release();
    await first;
    answer = { status: 200 };
    // The same clock reading again: the report still comes after the last.
    await sender.send(load({ 'ns/a': 3 }), 1_000_000);
    expect(received.map((r) => [r.body.sentAt, r.body.concurrency])).toEqual([
      [1_000_000, { 'ns/a': 1 }],
      [1_000_001, { 'ns/a': 3 }],
    ]);
  });

  it('a 401 makes the key be read again; an undelivered empty report is sent again', async () => {
    const sender = reports();
    await sender.send(load({ 'ns/a': 1 }), 1_000_000);
    answer = { status: 401 };
    await sender.send(load({}), 1_001_000);
    expect(mismatches).toBe(1);
    answer = { status: 200 };
    // The leader may still hold the load: the empty report goes again, once.
    await sender.send(load({}), 1_002_000);
    expect(sender.send(load({}), 1_003_000)).toBeUndefined();
    expect(received.map((r) => r.body.sentAt)).toEqual([1_000_000, 1_001_000, 1_002_000]);
    expect(mismatches).toBe(1);
  });

  const counts = (requests: number, errors = 0): CanaryCounts => ({
    key: 'ns/a',
    revision: 'r2',
    since: 900_000,
    requests,
    errors,
    latencies: Array(requests).fill(4),
  });

  it('sends each take of canary counts as a batch until the leader acknowledges it, and none while nothing was counted', async () => {
    const takes = [[counts(3, 1)], [counts(2)], [], [counts(5)]];
    const sender = reports(async () => takes.shift() ?? []);
    answer = { status: 503 };
    await sender.send(load({}), 1_000_000);
    answer = { status: 200 };
    await sender.send(load({}), 1_001_000);
    // Acknowledged: nothing to say, nothing sent.
    await sender.send(load({}), 1_002_000);
    await sender.send(load({}), 1_003_000);
    expect(received.map((r) => [r.body.sentAt, r.body.canaries])).toEqual([
      [1_000_000, [{ seq: 1_000_000, counts: [counts(3, 1)] }]],
      // The failed report's batch again, under its own seq, then this tick's.
      [
        1_001_000,
        [
          { seq: 1_000_000, counts: [counts(3, 1)] },
          { seq: 1_001_000, counts: [counts(2)] },
        ],
      ],
      [1_003_000, [{ seq: 1_003_000, counts: [counts(5)] }]],
    ]);
    expect(received.every((r) => r.signed)).toBe(true);
  });

  it(`keeps at most ${MAX_PENDING_BATCHES} unacknowledged batches, and drops those of a report the leader refused as malformed`, async () => {
    const sender = reports(async () => [counts(1)]);
    answer = { status: 503 };
    for (let i = 0; i < MAX_PENDING_BATCHES + 5; i++) await sender.send(load({}), 1_000_000 + i);
    const last = received.at(-1)?.body.canaries ?? [];
    expect(last).toHaveLength(MAX_PENDING_BATCHES);
    expect(last[0]?.seq).toBe(1_000_005);
    answer = { status: 400 };
    await sender.send(load({}), 2_000_000);
    answer = { status: 200 };
    await sender.send(load({}), 2_000_001);
    expect(received.at(-1)?.body.canaries).toEqual([{ seq: 2_000_001, counts: [counts(1)] }]);
  });
});

describe('ReplicaReports, the leader absorbing canary counts', () => {
  const leaderSide = () =>
    new ReplicaReports({
      http: {} as KubeHttp,
      logger: pino({ level: 'silent' }),
      namespace: 'sless-system',
      keySecret: 'sless-replica-key',
      identity: 'replica-a',
      leader: {
        isLeader: () => true,
        info: (): LeaderInfo => ({ identity: 'replica-a', holder: 'replica-a', isLeader: true }),
        leaderUrl: () => undefined,
      },
      intervalMs: 1000,
      key: { get: async () => KEY, mismatch: () => undefined },
    });
  const step = { key: 'ns/a', revision: 'r2', since: 900_000 };
  const batch = (seq: number, requests: number, errors: number) => ({
    seq,
    counts: [{ ...step, requests, errors, latencies: [seq] }],
  });

  it('absorbs each batch once, whether resent, duplicated or arriving after a later report', () => {
    const leader = leaderSide();
    const report = (sentAt: number, canaries: ReturnType<typeof batch>[], replica = 'replica-b') => ({
      replica,
      sentAt,
      concurrency: {},
      canaries,
    });
    const first = report(1_000_000, [batch(10, 4, 1)]);
    leader.record(first, 1_000_000);
    // The same report again (a retry whose first try did arrive), and the next one resending it.
    leader.record(first, 1_000_100);
    leader.record(report(1_001_000, [batch(10, 4, 1), batch(11, 2, 0)]), 1_001_000);
    // An old report arriving late, long after the held one went stale: its batch is still not new.
    leader.record(report(1_000_500, [batch(10, 4, 1)]), 1_010_000);
    // Another replica's batches are its own, whatever their seq.
    leader.record(report(1_001_000, [batch(10, 1, 1)], 'replica-c'), 1_001_000);
    expect(leader.takeReceived()).toEqual([{ ...step, requests: 7, errors: 2, latencies: [10, 11, 10] }]);
    // Taken once: the next take has only what came after.
    expect(leader.takeReceived()).toEqual([]);
    leader.record(report(1_002_000, [batch(11, 2, 0), batch(12, 3, 0)]), 1_002_000);
    expect(leader.takeReceived()).toEqual([{ ...step, requests: 3, errors: 0, latencies: [12] }]);
  });

  it('starts a term without what the last one absorbed or held', () => {
    const leader = leaderSide();
    leader.record({ replica: 'replica-b', sentAt: 1, concurrency: {}, canaries: [batch(10, 4, 1)] }, 1);
    leader.clear();
    expect(leader.takeReceived()).toEqual([]);
  });
});
