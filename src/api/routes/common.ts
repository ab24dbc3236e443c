/**
 * What the `/v1` route files share: their path parameter shapes, the collection each kind is served
 * under, and the rule that a request body belongs to the namespace in its path and carries only
 * what a client may set.
 */
import { BadRequestError } from '../../core/errors.js';
import type { AnyResource } from '../../core/resources.js';
import type { KindName } from '../../core/schemas.js';

export interface NsParams {
  ns: string;
}
export interface NameParams extends NsParams {
  name: string;
}

export const COLLECTIONS: ReadonlyArray<{ collection: string; kind: KindName; tag: string }> = [
  { collection: 'sources', kind: 'GitSource', tag: 'sources' },
  { collection: 'functions', kind: 'Function', tag: 'functions' },
  { collection: 'triggers', kind: 'Trigger', tag: 'triggers' },
  { collection: 'jobs', kind: 'FunctionJob', tag: 'jobs' },
];

/**
 * A validated body as a resource of the path's namespace. A body naming another namespace is a
 * mistake (or an attempt to act elsewhere), so it is refused rather than silently moved.
 */
export function inNamespace<T extends AnyResource>(doc: Record<string, unknown>, ns: string): T {
  const resource = doc as unknown as T;
  const declared = resource.metadata.namespace;
  if (declared !== undefined && declared !== ns)
    throw new BadRequestError(
      `metadata.namespace: "${declared}" does not match the path's namespace "${ns}"`,
    );
  // Only what the API accepts goes to the store: status is the controller's to write.
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    metadata: {
      name: resource.metadata.name,
      namespace: ns,
      ...(resource.metadata.labels ? { labels: resource.metadata.labels } : {}),
      ...(resource.metadata.annotations ? { annotations: resource.metadata.annotations } : {}),
    },
    spec: resource.spec,
  } as T;
}
