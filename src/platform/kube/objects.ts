/** Small typed helpers over KubeHttp: server-side apply with the one field manager, get, delete. */
import { ConflictError } from '../../core/errors.js';
import { FIELD_MANAGER } from '../../core/resources.js';
import { Reason } from '../../core/status.js';
import { APPLY_PATCH, isStatus, KubeApiError, type KubeHttp } from './http.js';
import { collectionPath, labelSelector, objectPath, type ResourceType } from './resource-types.js';

export interface KubeMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  generation?: number;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: KubeMeta;
  [field: string]: unknown;
}

export interface KubeList<T> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

/**
 * A field sless would set is owned by another field manager (a person's `kubectl edit`, another
 * controller), and sless does not take it: the other manager's value stays and this says which.
 */
export class ApplyConflictError extends ConflictError {
  constructor(type: ResourceType, object: KubeObject, apiMessage: string, cause: unknown) {
    const { namespace, name } = object.metadata;
    super(
      `${type.kind} ${namespace ? `${namespace}/` : ''}${name} not applied: ${apiMessage} (sless does not take a field another field manager set: give the field the value in git, or clear that manager's ownership, and the next sync applies)`,
      Reason.ApplyConflict,
      cause,
    );
  }
}

/**
 * Server-side apply as `sless-controller`. Without `force` a field another manager owns is a conflict
 * (ApplyConflictError) and the other manager's value stays; only objects the controller owns by
 * design (its Deployments, Services and CronJobs, which drift repair takes back) are applied with
 * `force`. Two applies that both create the object race in the API server, and the loser gets 409
 * AlreadyExists; applying again then updates the object the winner made, so that case is retried.
 */
export async function apply<T extends KubeObject>(
  http: KubeHttp,
  type: ResourceType,
  object: KubeObject,
  options: { force?: boolean; dryRun?: boolean; headers?: Record<string, string> } = {},
): Promise<T> {
  const force = options.force ?? false;
  for (let attempt = 1; ; attempt++) {
    try {
      return await http.request<T>(
        'PATCH',
        objectPath(type, object.metadata.namespace, object.metadata.name),
        {
          query: {
            fieldManager: FIELD_MANAGER,
            force,
            ...(options.dryRun ? { dryRun: 'All' } : {}),
          },
          body: object,
          contentType: APPLY_PATCH,
          ...(options.headers ? { headers: options.headers } : {}),
        },
      );
    } catch (error) {
      if (!force && error instanceof KubeApiError && error.code === 409 && error.reason === 'Conflict')
        throw new ApplyConflictError(type, object, error.statusMessage, error);
      if (attempt >= 5 || !isStatus(error, 409)) throw error;
      await new Promise((r) => setTimeout(r, 20 * attempt));
    }
  }
}

export async function getObject<T extends KubeObject>(
  http: KubeHttp,
  type: ResourceType,
  namespace: string | undefined,
  name: string,
): Promise<T | undefined> {
  try {
    return await http.request<T>('GET', objectPath(type, namespace, name));
  } catch (error) {
    if (isStatus(error, 404)) return undefined;
    throw error;
  }
}

/** Lists every page; `namespace` undefined lists all namespaces. */
export async function listObjects<T extends KubeObject>(
  http: KubeHttp,
  type: ResourceType,
  options: { namespace?: string; labels?: Record<string, string> } = {},
): Promise<KubeList<T>> {
  const items: T[] = [];
  let token: string | undefined;
  let resourceVersion: string | undefined;
  do {
    const page = await http.request<KubeList<T>>('GET', collectionPath(type, options.namespace), {
      query: { labelSelector: labelSelector(options.labels), limit: 500, continue: token },
    });
    items.push(...(page.items ?? []));
    token = page.metadata?.continue || undefined;
    resourceVersion = page.metadata?.resourceVersion;
  } while (token);
  return { metadata: { resourceVersion }, items };
}

/** Deletes in the background (dependents by GC); resolves false when it was already gone. */
export async function deleteObject(
  http: KubeHttp,
  type: ResourceType,
  namespace: string | undefined,
  name: string,
): Promise<boolean> {
  try {
    await http.request('DELETE', objectPath(type, namespace, name), {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' },
    });
    return true;
  } catch (error) {
    if (isStatus(error, 404)) return false;
    throw error;
  }
}
