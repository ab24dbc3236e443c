/**
 * The record queries every invocation store answers with, on golden records: which are swept (old,
 * finished, nothing left to send, not a dead letter), which a worker takes up again, and a
 * namespace's listing newest first; answers are copies.
 */
import { describe, expect, it } from 'vitest';
import {
  invocationKey,
  listRecords,
  recordOf,
  sweepableKeys,
  unfinishedRecords,
} from './invocation-records.js';
import type { InvocationRecord, InvocationState } from './invocations.js';

function record(
  id: string,
  state: InvocationState,
  at: string,
  extra: Partial<InvocationRecord> = {},
): InvocationRecord {
  return {
    id,
    namespace: extra.namespace ?? 'team',
    function: 'fn',
    state,
    createdAt: at,
    updatedAt: at,
    request: { method: 'POST', path: '/', headers: [], body: '' },
    maxAttempts: 3,
    backoffMs: 1000,
    attempts: [],
    ...extra,
  };
}

const held = new Map(
  [
    record('old-ok', 'succeeded', '2026-01-01T00:00:00.000Z'),
    record('old-failed', 'failed', '2026-01-01T00:00:01.000Z'),
    record('old-dead', 'dead-lettered', '2026-01-01T00:00:02.000Z'),
    record('old-ok-callback', 'succeeded', '2026-01-01T00:00:03.000Z', {
      callback: { url: 'https://hooks.example/x', state: 'pending' },
    }),
    record('old-sent', 'succeeded', '2026-01-01T00:00:04.000Z', {
      callback: { url: 'https://hooks.example/x', state: 'sent', status: 200 },
    }),
    record('old-queued', 'queued', '2026-01-01T00:00:05.000Z'),
    record('old-running', 'running', '2026-01-01T00:00:06.000Z'),
    record('new-ok', 'succeeded', '2026-06-01T00:00:00.000Z'),
    record('other-ns', 'succeeded', '2026-01-01T00:00:07.000Z', { namespace: 'other' }),
  ].map((r) => [invocationKey(r.namespace, r.id), r]),
);

describe('invocation record queries', () => {
  it('sweeps the old finished records with nothing left to send, and keeps dead letters', () => {
    expect(sweepableKeys(held, '2026-03-01T00:00:00.000Z')).toEqual([
      'team/old-ok',
      'team/old-failed',
      'team/old-sent',
      'other/other-ns',
    ]);
    // A record updated exactly at the bound is not older than it.
    expect(sweepableKeys(held, '2026-01-01T00:00:00.000Z')).toEqual([]);
  });

  it('takes up again what is not final, and what is final with its callback still pending', () => {
    expect(unfinishedRecords(held).map((r) => r.id)).toEqual([
      'old-ok-callback',
      'old-queued',
      'old-running',
    ]);
  });

  it("lists one namespace's records newest first, by state and up to a limit", () => {
    expect(listRecords(held, 'team').map((r) => r.id)).toEqual([
      'new-ok',
      'old-running',
      'old-queued',
      'old-sent',
      'old-ok-callback',
      'old-dead',
      'old-failed',
      'old-ok',
    ]);
    expect(listRecords(held, 'team', { state: 'succeeded', limit: 2 }).map((r) => r.id)).toEqual([
      'new-ok',
      'old-sent',
    ]);
    expect(listRecords(held, 'other').map((r) => r.id)).toEqual(['other-ns']);
  });

  it('answers copies: editing one changes nothing held', () => {
    const one = recordOf(held, 'team', 'old-queued');
    expect(one?.state).toBe('queued');
    if (one) one.state = 'succeeded';
    const [listed] = listRecords(held, 'team', { state: 'queued' });
    if (listed) listed.attempts.push({} as never);
    expect(held.get('team/old-queued')).toMatchObject({ state: 'queued', attempts: [] });
    expect(recordOf(held, 'other', 'old-queued')).toBeUndefined();
  });
});
