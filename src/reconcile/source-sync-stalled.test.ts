/**
 * Golden values of a stalled GitSource: every condition a rejected commit, a pin off the branch or
 * the function quota leaves behind, messages included, at the generation of the spec it read, and
 * what a later good commit leaves of them. The table in source-sync.test.ts checks reasons; this
 * pins the words a user reads with `kubectl get gitsource -o yaml`.
 */
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { readerOf, silentLogger } from '../../test/helpers/reconcile-fakes.js';
import type { GitSource } from '../core/resources.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import { syncSource } from './source-sync.js';

const HEAD = 'a'.repeat(40);
const OLDER = 'b'.repeat(40);
const ELSEWHERE = 'e'.repeat(40);

const fnDoc = (name: string, runtime = 'nodejs20') =>
  stringify({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name },
    spec: { runtime, entrypoint: 'handler.handle' },
  });
const VALID = { 'fns/f/function.yaml': fnDoc('f'), 'fns/f/handler.js': 'export const handle = () => 1;\n' };
const INVALID = { 'fns/f/function.yaml': fnDoc('f', 'cobol') };

async function sourceIn(store: MemoryStore, spec: Partial<GitSource['spec']> = {}): Promise<GitSource> {
  return (await store.apply({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: 'repo', namespace: 'ns' },
    spec: { url: 'https://git.test/repo.git', ...spec } as GitSource['spec'],
  })) as GitSource;
}

async function statusOf(store: MemoryStore) {
  const status = (await store.get('GitSource', 'ns', 'repo'))?.status;
  return {
    ...status,
    conditions: (status?.conditions ?? [])
      .map(({ lastTransitionTime: _at, ...rest }) => rest)
      .sort((a, b) => a.type.localeCompare(b.type)),
  };
}

const quotaMessage =
  'quota: namespace ns may hold 0 functions; this commit defines 1 (SLESS_QUOTA_FUNCTIONS)';

describe('a stalled GitSource, golden', () => {
  it('an invalid manifest: Ready names the commit and what serves, Stalled the issues', async () => {
    const store = new MemoryStore();
    await syncSource(
      { store, logger: silentLogger },
      await sourceIn(store),
      readerOf({ head: OLDER, files: VALID }),
    );
    const before = (await store.get('GitSource', 'ns', 'repo')) as GitSource;
    const result = await syncSource(
      { store, logger: silentLogger },
      before,
      readerOf({ head: HEAD, files: INVALID }),
    );
    const issue = result.message ?? '';
    expect(issue).toContain('fns/f/function.yaml');
    expect(result).toEqual({ outcome: 'invalid', commit: HEAD, message: issue });
    const status = await statusOf(store);
    expect(status).toMatchObject({
      phase: 'Failed',
      lastAttemptedCommit: HEAD,
      lastSyncedCommit: OLDER,
      observedGeneration: 1,
    });
    expect(status.conditions).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'ValidationFailed',
        message: `commit ${HEAD.slice(0, 12)} rejected, still serving ${OLDER.slice(0, 12)}: ${issue}`,
        observedGeneration: 1,
      },
      {
        type: 'Reconciling',
        status: 'False',
        reason: 'ValidationFailed',
        message: `commit ${HEAD.slice(0, 12)} rejected, still serving ${OLDER.slice(0, 12)}: ${issue}`,
        observedGeneration: 1,
      },
      { type: 'Stalled', status: 'True', reason: 'ValidationFailed', message: issue, observedGeneration: 1 },
    ]);

    // The next good commit ends the stall (its function changed: the fake tree ids differ by commit);
    // neither Stalled nor Reconciling is left behind.
    await syncSource(
      { store, logger: silentLogger },
      (await store.get('GitSource', 'ns', 'repo')) as GitSource,
      readerOf({ head: ELSEWHERE, files: VALID }),
    );
    expect((await statusOf(store)).conditions).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'Synced',
        message: `applied 1 objects at ${ELSEWHERE.slice(0, 12)} (1 changed, 0 pruned)`,
        observedGeneration: 1,
      },
    ]);
  });

  it('a pin off the branch, at the generation of the spec that pinned it', async () => {
    const store = new MemoryStore();
    await sourceIn(store);
    // A second spec: generation 2, which every condition and observedGeneration must carry.
    const pinned = await sourceIn(store, { ref: { commit: ELSEWHERE } });
    expect(pinned.metadata.generation).toBe(2);
    const result = await syncSource(
      { store, logger: silentLogger },
      pinned,
      readerOf({ head: HEAD, files: VALID, onBranch: [OLDER] }),
    );
    const why = `spec.ref.commit: ${ELSEWHERE} is not a commit of branch "main"`;
    expect(result).toEqual({ outcome: 'invalid', commit: ELSEWHERE, message: why });
    const status = await statusOf(store);
    expect(status).toMatchObject({
      phase: 'Failed',
      lastAttemptedCommit: ELSEWHERE,
      pinnedCommit: ELSEWHERE,
      observedGeneration: 2,
    });
    expect(status.conditions).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'PinNotOnBranch',
        message: `${why}; nothing applied`,
        observedGeneration: 2,
      },
      {
        type: 'Reconciling',
        status: 'False',
        reason: 'PinNotOnBranch',
        message: `${why}; nothing applied`,
        observedGeneration: 2,
      },
      { type: 'Stalled', status: 'True', reason: 'PinNotOnBranch', message: why, observedGeneration: 2 },
    ]);
  });

  it('past the function quota: refused whole', async () => {
    const store = new MemoryStore();
    const result = await syncSource(
      { store, logger: silentLogger, maxFunctions: 0 },
      await sourceIn(store),
      readerOf({ head: HEAD, files: VALID }),
    );
    expect(result).toEqual({ outcome: 'invalid', commit: HEAD, message: quotaMessage });
    const readyMessage = `commit ${HEAD.slice(0, 12)} rejected, nothing of it applied: ${quotaMessage}`;
    expect((await statusOf(store)).conditions).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'QuotaExceeded',
        message: readyMessage,
        observedGeneration: 1,
      },
      {
        type: 'Reconciling',
        status: 'False',
        reason: 'QuotaExceeded',
        message: readyMessage,
        observedGeneration: 1,
      },
      {
        type: 'Stalled',
        status: 'True',
        reason: 'QuotaExceeded',
        message: quotaMessage,
        observedGeneration: 1,
      },
    ]);
    expect(await store.list('Function', { namespace: 'ns' })).toEqual([]);
  });
});
