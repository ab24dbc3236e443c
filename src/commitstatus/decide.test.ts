/**
 * The commit report's choice of Functions: a preview whose branch head is main's commit carries the
 * same source label and commit annotation as main's Functions, and must not count toward main's report.
 */
import { describe, expect, it } from 'vitest';
import { LABEL_PREVIEW, LABEL_PREVIEW_OF, previewFunctionName } from '../core/previews.js';
import { ANNOTATION_COMMIT, type GitSource, LABEL_SOURCE, type SlessFunction } from '../core/resources.js';
import { decideReport } from './decide.js';

const COMMIT = 'a'.repeat(40);

const source: GitSource = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'GitSource',
  metadata: { name: 'site', namespace: 'team' },
  spec: { url: 'https://git.example/acme/site.git', branch: 'main' },
  status: { lastAttemptedCommit: COMMIT, lastSyncedCommit: COMMIT },
} as GitSource;

function fn(name: string, phase: string, labels: Record<string, string> = {}): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name,
      namespace: 'team',
      labels: { [LABEL_SOURCE]: 'site', ...labels },
      annotations: { [ANNOTATION_COMMIT]: COMMIT },
    },
    spec: { runtime: 'nodejs22', entrypoint: 'index.handler', memoryMb: 128, timeoutSec: 30, replicas: 1 },
    status: { phase, commit: COMMIT, url: `http://sless/fn/team/${name}` },
  } as SlessFunction;
}

describe('decideReport', () => {
  const main = fn('hello', 'Ready');
  const previewLabels = { [LABEL_PREVIEW]: 'feature-x', [LABEL_PREVIEW_OF]: 'hello' };

  it('reports success on main while a preview at the same commit still deploys', () => {
    const preview = fn(previewFunctionName('hello', 'feature-x'), 'Building', previewLabels);
    expect(decideReport(source, [main, preview], 'http://dash')).toEqual({
      commit: COMMIT,
      state: 'success',
      description: 'hello serving',
      targetUrl: 'http://sless/fn/team/hello',
    });
  });

  it("does not turn main's report into a failure when a preview at the same commit failed", () => {
    const preview = fn(previewFunctionName('hello', 'feature-x'), 'Failed', previewLabels);
    expect(decideReport(source, [main, preview], undefined)?.state).toBe('success');
  });

  it("still counts main's own Functions", () => {
    expect(decideReport(source, [main, fn('other', 'Building')], undefined)).toMatchObject({
      state: 'pending',
      description: 'deploying other',
    });
  });
});
