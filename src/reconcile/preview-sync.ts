/**
 * The branch previews of one GitSource, synced after its main branch: each branch that spec.previews
 * matches gets its own Function objects (`{function}--{label}`, labelled with the preview), planned
 * from its head as the main branch is, so their build keys are the same wherever the code is and the
 * builds are shared. Previews hold Functions only: a preview's cron trigger or job would run twice.
 * A branch gone, or no longer matching, takes its objects with it; a failure to list the branches
 * prunes nothing. Main's objects are never written here: every write is scoped to one preview label.
 * Preview Functions count against the namespace's function quota.
 */
import { branchOf } from '../core/defaults.js';
import { asError, formatIssue } from '../core/errors.js';
import { sortKeysDeep } from '../core/hash.js';
import type { SourceReader } from '../core/interfaces.js';
import { functionPath } from '../core/naming.js';
import {
  ANNOTATION_PREVIEW_BRANCH,
  DEFAULT_PREVIEW_IDLE_SECONDS,
  LABEL_PREVIEW,
  LABEL_PREVIEW_OF,
  type PreviewTarget,
  previewFunctionName,
  selectPreviews,
} from '../core/previews.js';
import {
  ANNOTATION_CONFIG_HASH,
  type AnyResource,
  type GitSource,
  type GitSourceStatus,
  LABEL_SOURCE,
  type PreviewStatus,
  type SlessFunction,
} from '../core/resources.js';
import type { FunctionSpec } from '../core/schemas.js';
import { applyPlan } from './apply-plan.js';
import { loadCommitManifests, planCommit } from './load-commit.js';
import { computeConfigHash, type Plan } from './plan.js';
import type { SyncDeps } from './source-sync.js';

export interface PreviewSyncResult {
  /** Objects written or pruned across every preview. */
  changed: number;
  pruned: string[];
}

/**
 * Syncs every preview of the source and writes `status.previews` and `status.previewErrors`. A source
 * without spec.previews prunes what earlier previews left, and says nothing in status.
 */
export async function syncPreviews(
  deps: SyncDeps,
  source: GitSource,
  reader: SourceReader,
  status: GitSourceStatus,
  options: { force?: boolean } = {},
): Promise<PreviewSyncResult> {
  const result: PreviewSyncResult = { changed: 0, pruned: [] };
  const { namespace, name } = source.metadata;
  const settings = source.spec.previews;
  // Undefined, not deleted: status is written as a merge, where only an explicit absence removes a field.
  if (!settings && !status.previews?.length) {
    status.previews = undefined;
    status.previewErrors = undefined;
    return result;
  }
  const inNamespace = await deps.store.list('Function', { namespace });
  const existing = inNamespace.filter(
    (fn) => fn.metadata.labels?.[LABEL_SOURCE] === name && fn.metadata.labels?.[LABEL_PREVIEW] !== undefined,
  );
  // Previews count against the namespace's function quota like any Function: a tenant's branches
  // must not be a way past it.
  let held = inNamespace.length;
  let selected: PreviewTarget[] = [];
  const errors: string[] = [];
  if (settings) {
    let branches: { branch: string; commit: string }[];
    try {
      if (!reader.listBranches) throw new Error('this source cannot list its branches');
      branches = await reader.listBranches();
    } catch (thrown) {
      // Nothing is known of the branches: every preview stays as it was until the next poll.
      status.previewErrors = [`cannot list the branches: ${asError(thrown).message}`];
      return result;
    }
    const main = branchOf(source).replace(/^refs\/heads\//, '');
    const selection = selectPreviews(branches, settings.branches, main);
    selected = selection.previews;
    for (const collision of selection.collisions)
      errors.push(
        `branches ${collision.branches.map((b) => `"${b}"`).join(' and ')} all normalise to the preview label "${collision.label}": none of them is previewed; rename one`,
      );
  }
  const previous = new Map((status.previews ?? []).map((p) => [p.label, p]));
  const previews: PreviewStatus[] = [];
  const idleSeconds = settings?.idleSeconds ?? DEFAULT_PREVIEW_IDLE_SECONDS;
  for (const target of selected) {
    const before = previous.get(target.label);
    const hasObjects = existing.some((fn) => fn.metadata.labels?.[LABEL_PREVIEW] === target.label);
    if (
      before &&
      before.commit === target.commit &&
      before.branch === target.branch &&
      !options.force &&
      (hasObjects || before.urls.length === 0)
    ) {
      previews.push(before);
      continue;
    }
    try {
      const plan = await planPreview(deps, source, reader, target);
      if (typeof plan === 'string') {
        errors.push(plan);
        // What served before keeps serving: a rejected commit applies nothing.
        if (before) previews.push(before);
        continue;
      }
      const mine = existing.filter((fn) => fn.metadata.labels?.[LABEL_PREVIEW] === target.label).length;
      if (deps.maxFunctions !== undefined && held - mine + plan.functions.size > deps.maxFunctions) {
        errors.push(
          `branch "${target.branch}" not previewed: quota: namespace ${namespace} may hold ${deps.maxFunctions} functions; it holds ${held - mine} and the preview would add ${plan.functions.size} (SLESS_QUOTA_FUNCTIONS)`,
        );
        if (before) previews.push(before);
        continue;
      }
      held += plan.functions.size - mine;
      const objects = previewObjects(plan, target, idleSeconds);
      const applied = await applyPlan(
        deps.store,
        source,
        { ...plan, objects },
        (kind, object) => result.pruned.push(`${kind}/${object}`),
        existing,
        target.label,
      );
      result.changed += applied.changed;
      previews.push({
        branch: target.branch,
        label: target.label,
        commit: target.commit,
        urls: [...plan.functions.keys()].sort().map((fn) => `${functionPath(namespace, fn)}@${target.label}`),
      });
    } catch (thrown) {
      errors.push(`branch "${target.branch}" at ${target.commit.slice(0, 12)}: ${asError(thrown).message}`);
      if (before) previews.push(before);
    }
  }
  // Previews whose branch is gone, no longer matches, or now shares its label with another branch.
  const kept = new Set(previews.map((p) => p.label));
  for (const fn of existing) {
    if (kept.has(fn.metadata.labels?.[LABEL_PREVIEW] as string)) continue;
    await deps.store.delete('Function', fn.metadata.namespace, fn.metadata.name);
    result.pruned.push(`Function/${fn.metadata.name}`);
  }
  status.previews = settings ? previews : undefined;
  status.previewErrors = settings ? errors : undefined;
  if (errors.length > 0) deps.logger.warn({ source: name, errors }, 'some branch previews are not served');
  return result;
}

/** The plan of one preview's head, or why its manifests were rejected. */
async function planPreview(
  deps: SyncDeps,
  source: GitSource,
  reader: SourceReader,
  target: PreviewTarget,
): Promise<Plan | string> {
  const snapshot = await reader.snapshot(target.commit, target.branch);
  const loaded = await loadCommitManifests(deps, source, snapshot);
  const sops = deps.repoSecrets ? await deps.repoSecrets.sopsFiles(snapshot, source) : [];
  for (const file of sops) loaded.manifestFiles.add(file);
  if (loaded.issues.length > 0)
    return `branch "${target.branch}" at ${target.commit.slice(0, 12)} rejected: ${loaded.issues.map(formatIssue).join('; ')}`;
  return planCommit(deps, source, snapshot, loaded);
}

/**
 * The preview's Function objects: the branch's Functions renamed, labelled with the preview and the
 * Function they preview, at rest after `idleSeconds`. A canary rollout and autoscaling bounds are
 * left out: a preview takes its branch's new code at once, and its floor is zero.
 */
export function previewObjects(plan: Plan, target: PreviewTarget, idleSeconds: number): AnyResource[] {
  const objects: AnyResource[] = [];
  for (const [fnName, planned] of [...plan.functions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const { rollout: _rollout, scale: _scale, ...rest } = planned.object.spec;
    const spec: FunctionSpec = {
      ...rest,
      replicas: 1,
      scaleToZero: { ...(rest.scaleToZero ?? {}), idleSeconds },
    };
    const object: SlessFunction = {
      ...planned.object,
      metadata: {
        ...planned.object.metadata,
        name: previewFunctionName(fnName, target.label),
        labels: sortedRecord({
          ...planned.object.metadata.labels,
          [LABEL_PREVIEW]: target.label,
          [LABEL_PREVIEW_OF]: fnName,
        }),
        annotations: sortedRecord({
          ...planned.object.metadata.annotations,
          [ANNOTATION_CONFIG_HASH]: computeConfigHash(spec),
          [ANNOTATION_PREVIEW_BRANCH]: target.branch,
        }),
      },
      spec,
    };
    objects.push(object);
  }
  return objects;
}

const sortedRecord = (record: Record<string, string>) => sortKeysDeep(record) as Record<string, string>;
