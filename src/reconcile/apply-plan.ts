/**
 * Applying one plan: the objects that differ from what the source applied before are written, the
 * ones it no longer has are pruned, each within its scope (the main branch's objects, or one branch
 * preview's), and an object another source or scope holds is an ownership conflict.
 */

import { ConflictError } from '../core/errors.js';
import { sameJson } from '../core/hash.js';
import type { ObjectStore } from '../core/interfaces.js';
import { LABEL_PREVIEW } from '../core/previews.js';
import {
  ANNOTATION_COMMIT,
  type AnyResource,
  type GitSource,
  LABEL_SOURCE,
  refKey,
  refOf,
} from '../core/resources.js';
import { REPO_KINDS } from '../core/schemas.js';
import { Reason } from '../core/status.js';
import type { Plan } from './plan.js';

/**
 * Applies the planned objects that differ from what this source applied before, and prunes those it
 * no longer has. An object whose only difference is the commit annotation is left alone: a commit
 * that changes one function of a thousand writes one object (and on kube sends one apply), not a
 * thousand. So `sless.dev/commit` is the commit at which the object last changed. What exists is read
 * with one list per kind; only objects new to this source are read one by one (the ownership check).
 * `functions`, the namespace's Functions when the caller has listed them already, saves that list.
 * `preview` scopes the apply to one branch preview's objects (label LABEL_PREVIEW); without it, to
 * the main branch's, which carry no such label. Either scope sees, changes and prunes only its own
 * objects, and an object of the other scope in the way is an ownership conflict, never overwritten.
 */
export async function applyPlan(
  store: ObjectStore,
  source: GitSource,
  plan: Plan,
  onPruned?: (kind: string, name: string) => void,
  functions?: readonly AnyResource[],
  preview?: string,
): Promise<{ changed: number; pruned: number }> {
  const wanted = new Set(plan.objects.map((o) => refKey(refOf(o))));
  const existing = new Map<string, AnyResource>();
  const mine = { namespace: source.metadata.namespace, labels: { [LABEL_SOURCE]: source.metadata.name } };
  const inScope = (object: AnyResource) => object.metadata.labels?.[LABEL_PREVIEW] === preview;
  for (const kind of REPO_KINDS) {
    const objects =
      kind === 'Function' && functions
        ? functions.filter((f) => f.metadata.labels?.[LABEL_SOURCE] === source.metadata.name)
        : await store.list(kind, mine);
    for (const object of objects) if (inScope(object)) existing.set(refKey(refOf(object)), object);
  }
  let changed = 0;
  const applyOne = async (object: AnyResource) => {
    const key = refKey(refOf(object));
    const before =
      existing.get(key) ?? (await store.get(object.kind, object.metadata.namespace, object.metadata.name));
    const owner = before?.metadata.labels?.[LABEL_SOURCE];
    if (before && owner !== undefined && owner !== source.metadata.name) {
      throw new ConflictError(
        `${object.kind} "${object.metadata.name}" is already owned by source "${owner}"`,
        Reason.OwnershipConflict,
      );
    }
    // The main branch never takes over a preview's object, nor a preview anything not its own.
    if (before && !inScope(before) && (owner !== undefined || preview !== undefined)) {
      const held = before.metadata.labels?.[LABEL_PREVIEW];
      throw new ConflictError(
        `${object.kind} "${object.metadata.name}" already belongs to ${held === undefined ? 'the main branch' : `the preview "${held}"`} of source "${owner ?? source.metadata.name}"`,
        Reason.OwnershipConflict,
      );
    }
    if (before && sameIntent(before, object)) return;
    const after = await store.apply(object);
    if (after.metadata.resourceVersion !== before?.metadata.resourceVersion) changed++;
  };
  // Functions first, so a trigger or job never refers to a function that is not there yet. Within a
  // kind the writes are independent, and a few at a time let a durable store write them together
  // instead of once per object (a commit of thousands of functions).
  for (const kind of REPO_KINDS)
    await forEachBounded(
      plan.objects.filter((o) => o.kind === kind),
      APPLY_CONCURRENCY,
      applyOne,
    );
  let pruned = 0;
  for (const kind of [...REPO_KINDS].reverse()) {
    const gone = [...existing].filter(([key, object]) => object.kind === kind && !wanted.has(key));
    await forEachBounded(gone, APPLY_CONCURRENCY, async ([, object]) => {
      await store.delete(kind, object.metadata.namespace, object.metadata.name);
      pruned++;
      onPruned?.(kind, object.metadata.name);
    });
  }
  return { changed, pruned };
}

const APPLY_CONCURRENCY = 32;

/** Runs `work` over `items` with at most `limit` in flight; the first failure is thrown after all settle. */
async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
}

/**
 * Same labels, spec and annotations, the commit annotation aside. Compared in place, not as stable
 * JSON texts: a sync of a thousand unchanged functions compares a thousand pairs, and making two
 * sorted texts of each cost more than the rest of the sync. Compared as JSON would be, though: a
 * field set to `undefined` is a field not set, as it is once stored.
 */
export function sameIntent(current: AnyResource, planned: AnyResource): boolean {
  const annotations = (object: AnyResource) => {
    const { [ANNOTATION_COMMIT]: _commit, ...rest } = object.metadata.annotations ?? {};
    return rest;
  };
  return (
    sameJson(current.spec, planned.spec) &&
    sameJson(current.metadata.labels ?? {}, planned.metadata.labels ?? {}) &&
    sameJson(annotations(current), annotations(planned))
  );
}
