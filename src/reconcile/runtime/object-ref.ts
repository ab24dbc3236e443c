/**
 * Typed references to the objects reconcilers work on, and the `namespace/name` key the work queues
 * hold them by: one place that builds and splits keys, instead of template strings at every caller.
 */
import { objectKey, splitObjectKey } from '../../core/object-key.js';
import type { KindName } from '../../core/schemas.js';

export interface ObjectRef<K extends KindName = KindName> {
  readonly kind: K;
  readonly namespace: string;
  readonly name: string;
}

export function objectRef<K extends KindName>(kind: K, namespace: string, name: string): ObjectRef<K> {
  return { kind, namespace, name };
}

/** The object's reference, from its metadata. */
export function refOf<K extends KindName>(
  kind: K,
  object: { metadata: { namespace: string; name: string } },
): ObjectRef<K> {
  return objectRef(kind, object.metadata.namespace, object.metadata.name);
}

/** `namespace/name`: the work queue's key of a reference (a name never holds a slash). */
export function refKey(ref: Pick<ObjectRef, 'namespace' | 'name'>): string {
  return objectKey(ref.namespace, ref.name);
}

/** The reference a work-queue key stands for. */
export function refFromKey<K extends KindName>(kind: K, key: string): ObjectRef<K> {
  const { namespace, name } = splitObjectKey(key);
  return objectRef(kind, namespace, name);
}
