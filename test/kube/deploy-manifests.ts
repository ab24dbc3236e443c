/**
 * Reads deploy/ the way `kubectl apply -k` would for what it uses: resources (files and bases with
 * their own kustomization.yaml), the namespace transform and common labels. No kubectl binary here.
 */
import { readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../src/platform/kube/objects.js';
import type { ResourceType } from '../../src/platform/kube/resource-types.js';

interface Kustomization {
  namespace?: string;
  resources?: string[];
  labels?: { pairs: Record<string, string> }[];
}

const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
]);

export async function loadKustomization(dir: string): Promise<KubeObject[]> {
  const k = (await readYaml(join(dir, 'kustomization.yaml')))[0] as unknown as Kustomization;
  const out: KubeObject[] = [];
  for (const resource of k.resources ?? []) {
    const path = join(dir, resource);
    const objects = (await stat(path)).isDirectory() ? await loadKustomization(path) : await readYaml(path);
    out.push(...objects);
  }
  for (const object of out) {
    if (k.namespace && !CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = k.namespace;
    for (const l of k.labels ?? [])
      object.metadata.labels = { ...(object.metadata.labels ?? {}), ...l.pairs };
  }
  return out;
}

async function readYaml(path: string): Promise<KubeObject[]> {
  const docs = parseAllDocuments(await readFile(path, 'utf8'));
  return docs.map((d) => d.toJS() as KubeObject).filter((o) => o && typeof o === 'object');
}

export const DEPLOY_DIR = join(dirname(new URL(import.meta.url).pathname), '..', '..', 'deploy');

const PLURALS: Record<string, string> = {
  Namespace: 'namespaces',
  ServiceAccount: 'serviceaccounts',
  ClusterRole: 'clusterroles',
  ClusterRoleBinding: 'clusterrolebindings',
  Role: 'roles',
  RoleBinding: 'rolebindings',
  PodDisruptionBudget: 'poddisruptionbudgets',
  ConfigMap: 'configmaps',
  Secret: 'secrets',
  Deployment: 'deployments',
  Service: 'services',
  CustomResourceDefinition: 'customresourcedefinitions',
};

export function typeOf(object: KubeObject): ResourceType {
  const plural = PLURALS[object.kind];
  if (!plural) throw new Error(`deploy/ has an unexpected kind ${object.kind}`);
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    plural,
    namespaced: object.metadata.namespace !== undefined,
  };
}
