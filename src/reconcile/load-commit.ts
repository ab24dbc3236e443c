/**
 * One commit of a source read for a sync: its manifests parsed (through the cache kept across syncs)
 * and then planned (build keys included), as the main branch and each branch preview both need.
 */
import type { SourceSnapshot } from '../core/interfaces.js';
import type { GitSource } from '../core/resources.js';
import { type LoadResult, loadManifests, type ParsedManifestCache } from '../manifest/load.js';
import { type BuildKeyCache, type Plan, planSource } from './plan.js';

export interface CommitDeps {
  /** Parsed manifests by blob id, kept across syncs. */
  manifests?: ParsedManifestCache;
  buildKeys?: BuildKeyCache;
  /** Told every plan made (tests, metrics). */
  planned?: (plan: Plan) => void;
}

/** The commit's manifests below the source's path, in the source's namespace. */
export function loadCommitManifests(
  deps: CommitDeps,
  source: GitSource,
  snapshot: SourceSnapshot,
): Promise<LoadResult> {
  return loadManifests(snapshot, {
    root: source.spec.path ?? '.',
    namespace: source.metadata.namespace,
    ...(deps.manifests ? { cache: deps.manifests } : {}),
  });
}

/** The plan of manifests that loaded without issues. */
export async function planCommit(
  deps: CommitDeps,
  source: GitSource,
  snapshot: SourceSnapshot,
  loaded: LoadResult,
): Promise<Plan> {
  const plan = await planSource(
    source,
    snapshot,
    loaded,
    deps.buildKeys ? { buildKeys: deps.buildKeys } : {},
  );
  deps.planned?.(plan);
  return plan;
}
