/**
 * Reads deploy/ the way `kubectl apply -k` would for what it uses: resources (files and bases with
 * their own kustomization.yaml), components with their resources and JSON patches (`add` only), the
 * namespace transform and common labels. No kubectl binary here.
 */
import { readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../src/platform/kube/objects.js';
import type { ResourceType } from '../../src/platform/kube/resource-types.js';

interface Kustomization {
  namespace?: string;
  resources?: string[];
  components?: string[];
  patches?: { path: string; target: { kind: string; name: string } }[];
  labels?: { pairs: Record<string, string> }[];
}

interface JsonPatchOp {
  op: string;
  path: string;
  value: unknown;
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
    const path = resolve(dir, resource);
    const objects = (await stat(path)).isDirectory() ? await loadKustomization(path) : await readYaml(path);
    out.push(...objects);
  }
  // A component adds its resources to what was rendered so far and patches all of it.
  for (const component of k.components ?? []) {
    const path = resolve(dir, component);
    const c = (await readYaml(join(path, 'kustomization.yaml')))[0] as unknown as Kustomization & {
      kind: string;
    };
    if (c.kind !== 'Component') throw new Error(`${path} is not a kustomize Component`);
    for (const resource of c.resources ?? []) out.push(...(await readYaml(resolve(path, resource))));
    for (const patch of c.patches ?? []) {
      const ops = (await readYaml(resolve(path, patch.path))).flat() as unknown as JsonPatchOp[];
      const targets = out.filter(
        (o) => o.kind === patch.target.kind && o.metadata.name === patch.target.name,
      );
      if (targets.length === 0)
        throw new Error(`${patch.path}: no ${patch.target.kind}/${patch.target.name}`);
      for (const target of targets) for (const op of ops) applyJsonPatch(target, op);
    }
  }
  for (const object of out) {
    if (k.namespace && !CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = k.namespace;
    for (const l of k.labels ?? [])
      object.metadata.labels = { ...(object.metadata.labels ?? {}), ...l.pairs };
  }
  return out;
}

/** RFC 6902 `add`, the one operation deploy/ uses: into an object's key, or appended with `-`. */
function applyJsonPatch(target: KubeObject, op: JsonPatchOp): void {
  if (op.op !== 'add') throw new Error(`JSON patch op ${op.op} is not read here`);
  const keys = op.path.split('/').slice(1);
  const last = keys.pop() as string;
  let node: unknown = target;
  for (const key of keys) {
    node = (node as Record<string, unknown>)[key];
    if (node === undefined) throw new Error(`JSON patch path ${op.path} does not exist`);
  }
  if (Array.isArray(node)) {
    if (last === '-') node.push(op.value);
    else node.splice(Number(last), 0, op.value);
  } else (node as Record<string, unknown>)[last] = op.value;
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
