/** API paths of the resource types the kube platform touches; no discovery round trips needed. */
import { API_GROUP, API_VERSION_NAME, KINDS, type KindName } from '../../core/schemas.js';

export interface ResourceType {
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export const DEPLOYMENT: ResourceType = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  plural: 'deployments',
  namespaced: true,
};
export const DAEMON_SET: ResourceType = {
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  plural: 'daemonsets',
  namespaced: true,
};
export const SERVICE: ResourceType = {
  apiVersion: 'v1',
  kind: 'Service',
  plural: 'services',
  namespaced: true,
};
export const JOB: ResourceType = { apiVersion: 'batch/v1', kind: 'Job', plural: 'jobs', namespaced: true };
export const CRONJOB: ResourceType = {
  apiVersion: 'batch/v1',
  kind: 'CronJob',
  plural: 'cronjobs',
  namespaced: true,
};
export const POD: ResourceType = { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true };
export const CONFIG_MAP: ResourceType = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  plural: 'configmaps',
  namespaced: true,
};
export const SECRET: ResourceType = { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true };
export const ENDPOINT_SLICE: ResourceType = {
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  plural: 'endpointslices',
  namespaced: true,
};
export const NAMESPACE: ResourceType = {
  apiVersion: 'v1',
  kind: 'Namespace',
  plural: 'namespaces',
  namespaced: false,
};

export function slessType(kind: KindName): ResourceType {
  return {
    apiVersion: `${API_GROUP}/${API_VERSION_NAME}`,
    kind,
    plural: KINDS[kind].plural,
    namespaced: true,
  };
}

function groupPath(apiVersion: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

/** The collection: all namespaces when `namespace` is undefined. */
export function collectionPath(type: ResourceType, namespace?: string): string {
  const ns = type.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${groupPath(type.apiVersion)}${ns}/${type.plural}`;
}

export function objectPath(
  type: ResourceType,
  namespace: string | undefined,
  name: string,
  subresource?: string,
): string {
  const base = `${collectionPath(type, namespace)}/${encodeURIComponent(name)}`;
  return subresource ? `${base}/${subresource}` : base;
}

/** `a=b,c=d`, sorted, for labelSelector queries. */
export function labelSelector(labels: Record<string, string> | undefined): string | undefined {
  if (!labels || Object.keys(labels).length === 0) return undefined;
  return Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
