/**
 * One GitSource sync, table-driven, against MemoryStore with a fake source reader (its branch head,
 * its files, which commits are on the branch). Each row gives the world before one sync and the
 * conditions it must leave behind.
 */
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { functionResource, readerOf, silentLogger } from '../../test/helpers/reconcile-fakes.js';
import { SourceError } from '../core/errors.js';
import type { GitSource, GitSourceStatus } from '../core/resources.js';
import { Reason } from '../core/status.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { type SyncResult, syncSource } from './source-sync.js';

const HEAD = 'a'.repeat(40);
const OLDER = 'b'.repeat(40);
const ELSEWHERE = 'e'.repeat(40);

const fnDoc = (name: string) =>
  stringify({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
  });
const VALID = { 'fns/f/function.yaml': fnDoc('f'), 'fns/f/handler.js': 'export const handle = () => 1;\n' };
const INVALID = { 'fns/f/function.yaml': fnDoc('f').replace('nodejs20', 'cobol') };

const synced = (commit: string): GitSourceStatus => ({
  lastSyncedCommit: commit,
  lastAttemptedCommit: commit,
  objects: 1,
  observedGeneration: 1,
});
const cond = (type: 'Ready' | 'Stalled', status: 'True' | 'False', reason: string) => ({
  type,
  status,
  reason,
  message: 'before',
  observedGeneration: 1,
  lastTransitionTime: 't0',
});

type Expected = [status: 'True' | 'False', reason: string];

interface Row {
  name: string;
  spec?: Partial<GitSource['spec']>;
  /** The source's status before the sync. */
  before?: GitSourceStatus;
  head?: string | Error;
  files?: Record<string, string>;
  onBranch?: string[] | Error;
  maxFunctions?: number;
  /** A Function of the same name another source applied already. */
  foreignFunction?: boolean;
  /** Functions of other names that another source of the namespace applied already. */
  otherSourceFunctions?: number;
  expect: {
    outcome: SyncResult['outcome'];
    phase: string;
    ready: Expected;
    /** Absent: no Stalled condition. */
    stalled?: Expected;
    lastSyncedCommit?: string;
    /** The message of Ready contains this. */
    message?: string;
    /** The sync leaves status exactly as it was. */
    untouched?: boolean;
  };
}

const rows: Row[] = [
  {
    name: 'suspended before its first sync',
    spec: { suspend: true },
    expect: { outcome: 'suspended', phase: 'Suspended', ready: ['False', Reason.Suspended] },
  },
  {
    name: 'the branch does not exist',
    head: new SourceError('branch "main" not found', 'BranchNotFound'),
    expect: { outcome: 'failed', phase: 'Failed', ready: ['False', 'BranchNotFound'], message: 'not found' },
  },
  {
    name: 'the server is unreachable (an untyped error)',
    head: new Error('connect ECONNREFUSED'),
    expect: {
      outcome: 'failed',
      phase: 'Failed',
      ready: ['False', Reason.SourceFailed],
      message: 'ECONNREFUSED',
    },
  },
  {
    name: 'a valid commit is applied',
    expect: {
      outcome: 'synced',
      phase: 'Ready',
      ready: ['True', Reason.Synced],
      lastSyncedCommit: HEAD,
      message: `applied 1 objects at ${HEAD.slice(0, 12)}`,
    },
  },
  {
    name: 'an invalid manifest stalls the source, nothing applied',
    files: INVALID,
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', Reason.ValidationFailed],
      stalled: ['True', Reason.ValidationFailed],
      message: 'nothing applied',
    },
  },
  {
    name: 'an invalid manifest while an older commit serves',
    before: { ...synced(OLDER), conditions: [cond('Ready', 'True', Reason.Synced)] },
    files: INVALID,
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', Reason.ValidationFailed],
      stalled: ['True', Reason.ValidationFailed],
      lastSyncedCommit: OLDER,
      message: `still serving ${OLDER.slice(0, 12)}`,
    },
  },
  {
    name: 'a rejected commit is not read again on the next poll',
    before: {
      ...synced(OLDER),
      lastAttemptedCommit: HEAD,
      conditions: [
        cond('Ready', 'False', Reason.ValidationFailed),
        cond('Stalled', 'True', Reason.ValidationFailed),
      ],
    },
    expect: {
      outcome: 'unchanged',
      phase: 'unset',
      ready: ['False', Reason.ValidationFailed],
      stalled: ['True', Reason.ValidationFailed],
      lastSyncedCommit: OLDER,
      untouched: true,
    },
  },
  {
    name: 'the unchanged head clears an earlier error (the server was unreachable for a while)',
    before: { ...synced(HEAD), conditions: [cond('Ready', 'False', Reason.SourceFailed)] },
    expect: {
      outcome: 'unchanged',
      phase: 'Ready',
      ready: ['True', Reason.Synced],
      lastSyncedCommit: HEAD,
      message: `applied 1 objects at ${HEAD.slice(0, 12)}`,
    },
  },
  {
    name: 'the branch moved back from a rejected commit to the one applied: Stalled is over',
    before: {
      ...synced(HEAD),
      lastAttemptedCommit: OLDER,
      conditions: [
        cond('Ready', 'False', Reason.ValidationFailed),
        cond('Stalled', 'True', Reason.ValidationFailed),
      ],
    },
    expect: { outcome: 'unchanged', phase: 'Ready', ready: ['True', Reason.Synced], lastSyncedCommit: HEAD },
  },
  {
    name: 'the unchanged head of a synced source writes nothing',
    before: { ...synced(HEAD), phase: 'Ready', conditions: [cond('Ready', 'True', Reason.Synced)] },
    expect: {
      outcome: 'unchanged',
      phase: 'Ready',
      ready: ['True', Reason.Synced],
      lastSyncedCommit: HEAD,
      untouched: true,
    },
  },
  {
    name: 'pinned to a commit of the branch: that commit is applied, not the head',
    spec: { ref: { commit: OLDER } },
    onBranch: [OLDER],
    expect: { outcome: 'synced', phase: 'Ready', ready: ['True', Reason.Synced], lastSyncedCommit: OLDER },
  },
  {
    name: 'pinned to a commit not on the branch: stalled, nothing applied',
    spec: { ref: { commit: ELSEWHERE } },
    onBranch: [OLDER],
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', Reason.PinNotOnBranch],
      stalled: ['True', Reason.PinNotOnBranch],
      message: 'is not a commit of branch "main"; nothing applied',
    },
  },
  {
    name: 'pinned, and the history cannot be read',
    spec: { ref: { commit: OLDER } },
    onBranch: new SourceError('cannot fetch', 'FetchFailed'),
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', 'FetchFailed'],
      stalled: ['True', 'FetchFailed'],
    },
  },
  {
    name: 'a commit past the namespace function quota is refused whole',
    maxFunctions: 0,
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', Reason.QuotaExceeded],
      stalled: ['True', Reason.QuotaExceeded],
    },
  },
  {
    name: "the function quota counts the namespace's other sources: one there and one here is past 1",
    maxFunctions: 1,
    otherSourceFunctions: 1,
    expect: {
      outcome: 'invalid',
      phase: 'Failed',
      ready: ['False', Reason.QuotaExceeded],
      stalled: ['True', Reason.QuotaExceeded],
      message: 'may hold 1 functions; its other sources hold 1 and this commit defines 1',
    },
  },
  {
    name: "the function quota counts the namespace's other sources: one there and one here fit in 2",
    maxFunctions: 2,
    otherSourceFunctions: 1,
    expect: {
      outcome: 'synced',
      phase: 'Ready',
      ready: ['True', Reason.Synced],
      lastSyncedCommit: HEAD,
    },
  },
  {
    name: 'a function another source owns is not taken over',
    foreignFunction: true,
    expect: {
      outcome: 'failed',
      phase: 'Failed',
      ready: ['False', Reason.OwnershipConflict],
      message: 'already owned by source "other"',
    },
  },
];

async function run(row: Row) {
  const store = new MemoryStore();
  let source = (await store.apply({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: 'repo', namespace: 'ns' },
    spec: { url: 'https://git.test/repo.git', ...row.spec } as GitSource['spec'],
  })) as GitSource;
  if (row.before) {
    await store.patchStatus(source, row.before);
    source = (await store.get('GitSource', 'ns', 'repo')) as GitSource;
  }
  if (row.foreignFunction) await store.apply(functionResource('f', {}, { 'sless.dev/source': 'other' }));
  for (let n = 0; n < (row.otherSourceFunctions ?? 0); n++)
    await store.apply(functionResource(`other-${n}`, {}, { 'sless.dev/source': 'other' }));
  const before = structuredClone(source.status);
  const reader = readerOf({
    head: row.head ?? HEAD,
    files: row.files ?? VALID,
    onBranch: row.onBranch ?? [],
  });
  const result = await syncSource(
    {
      store,
      logger: silentLogger,
      ...(row.maxFunctions !== undefined ? { maxFunctions: row.maxFunctions } : {}),
    },
    source,
    reader,
  );
  const after = (await store.get('GitSource', 'ns', 'repo'))?.status;
  return {
    result,
    before,
    after,
    reads: reader.snapshots,
    functions: await store.list('Function', { namespace: 'ns' }),
  };
}

describe('syncSource', () => {
  it.each(rows)('$name', async (row) => {
    const { result, before, after, reads, functions } = await run(row);
    const condition = (type: string) => after?.conditions?.find((c) => c.type === type);
    expect(result.outcome).toBe(row.expect.outcome);
    if (row.expect.untouched) {
      expect(after).toEqual(before);
      expect(reads).toEqual([]);
    } else expect(after?.phase).toBe(row.expect.phase);
    expect([condition('Ready')?.status, condition('Ready')?.reason]).toEqual(row.expect.ready);
    const stalled = condition('Stalled');
    expect(stalled && [stalled.status, stalled.reason]).toEqual(row.expect.stalled);
    if (row.expect.message !== undefined) expect(condition('Ready')?.message).toContain(row.expect.message);
    expect(after?.lastSyncedCommit).toBe(row.expect.lastSyncedCommit);
    // Every condition says which generation it describes (kstatus).
    for (const c of after?.conditions ?? []) expect(c.observedGeneration).toBe(1);
    expect(after?.observedGeneration).toBe(1);
    // A synced commit's Function is there; otherwise none of this source's is.
    const mine = functions.filter((f) => f.metadata.labels?.['sless.dev/source'] === 'repo');
    expect(mine.length).toBe(row.expect.outcome === 'synced' ? 1 : 0);
  });
});
