/**
 * What the git host should say on a source's commit, read from the objects alone (so it is the same
 * on both platforms): pending while the functions that commit changed build and roll out, success
 * once every one of them serves (with its URL), failure with the file and reason when the commit's
 * manifests were rejected or one of its functions failed. Functions the commit did not change are
 * not its business: they serve what an earlier commit built. Nor are a preview's Functions: they carry
 * the source's label and the branch head's commit, which is main's commit when the branch has not
 * moved on, but they report on the branch, never on main.
 */
import { LABEL_PREVIEW } from '../core/previews.js';
import {
  ANNOTATION_COMMIT,
  ANNOTATION_MANIFEST,
  type GitSource,
  LABEL_SOURCE,
  type SlessFunction,
} from '../core/resources.js';

export type CommitState = 'pending' | 'success' | 'failure';

export interface CommitReport {
  commit: string;
  state: CommitState;
  /** One line, at most 140 characters (GitHub's limit; the others allow more). */
  description: string;
  targetUrl?: string;
}

const MAX_DESCRIPTION = 140;

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_DESCRIPTION ? `${flat.slice(0, MAX_DESCRIPTION - 1)}…` : flat;
}

function fileOf(fn: SlessFunction): string {
  return (fn.metadata.annotations?.[ANNOTATION_MANIFEST] ?? fn.metadata.name).replace(/#\d+$/, '');
}

const SERVES = new Set(['Ready', 'ScaledToZero']);

/**
 * The report for the commit the source last attempted, or undefined when there is nothing to say
 * yet (never synced, or suspended). `dashboardUrl` is where a commit that changed several
 * functions links to.
 */
export function decideReport(
  source: GitSource,
  functions: readonly SlessFunction[],
  dashboardUrl: string | undefined,
): CommitReport | undefined {
  const status = source.status;
  const commit = status?.lastAttemptedCommit;
  if (!commit || source.spec.suspend) return undefined;
  const stalled = status?.conditions?.find((c) => c.type === 'Stalled' && c.status === 'True');
  if (stalled && status?.lastSyncedCommit !== commit)
    return {
      commit,
      state: 'failure',
      description: oneLine(`rejected: ${stalled.message ?? stalled.reason}`),
    };
  if (status?.lastSyncedCommit !== commit) return undefined;
  const changed = functions.filter(
    (fn) =>
      fn.metadata.labels?.[LABEL_SOURCE] === source.metadata.name &&
      fn.metadata.labels?.[LABEL_PREVIEW] === undefined &&
      fn.metadata.annotations?.[ANNOTATION_COMMIT] === commit,
  );
  const failed = changed.find((fn) => fn.status?.commit === commit && fn.status.phase === 'Failed');
  if (failed) {
    const ready = failed.status?.conditions?.find((c) => c.type === 'Ready');
    const why = failed.status?.lastError ?? ready?.message ?? ready?.reason ?? 'failed';
    return {
      commit,
      state: 'failure',
      description: oneLine(`${fileOf(failed)}: ${failed.metadata.name}: ${why}`),
    };
  }
  const waiting = changed.filter(
    (fn) => !(fn.status?.commit === commit && SERVES.has(fn.status.phase ?? '')),
  );
  if (waiting.length > 0)
    return {
      commit,
      state: 'pending',
      description: oneLine(
        `deploying ${waiting
          .map((fn) => fn.metadata.name)
          .sort()
          .join(', ')}`,
      ),
    };
  const only = changed.length === 1 ? changed[0]?.status?.url : undefined;
  const targetUrl = only ?? dashboardUrl;
  return {
    commit,
    state: 'success',
    description: oneLine(
      changed.length === 0
        ? 'no function changed'
        : `${changed.length === 1 ? changed[0]?.metadata.name : `${changed.length} functions`} serving`,
    ),
    ...(targetUrl ? { targetUrl } : {}),
  };
}
