/**
 * The Deployment a kube canary runs in, beside the function's own, and what the proxies read of it:
 * which revision it runs and the share of requests that revision takes. Its pods carry the function's
 * labels, so its Service lists them and the route cache knows their revision; the extra canary label
 * keeps the function's own Deployment from ever counting them as its own (it owns its ReplicaSets by
 * reference, and the canary's selector takes only canary pods).
 */
import type { MirroredCanary } from '../../core/interfaces.js';
import { boundedName } from '../../core/naming.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import {
  ANNOTATION_CANARY_SINCE,
  ANNOTATION_CANARY_WEIGHT,
  ANNOTATION_REVISION,
  LABEL_CANARY_OF,
  LABEL_FUNCTION,
} from './labels.js';
import type { KubeObject } from './objects.js';
import { deploymentFor, type WorkloadOptions } from './workload-manifests.js';

/** `{fn}-canary`: one canary per function at a time, so a restart finds it by name. */
export function canaryName(functionName: string): string {
  return boundedName([functionName], 'canary');
}

export interface CanaryShare {
  revision: string;
  weight: number;
  since: number;
}

/** A canary's pods for its share: enough of them for it, at least one. */
export function canaryReplicas(stableReplicas: number, weight: number): number {
  return Math.max(1, Math.ceil((stableReplicas * weight) / 100));
}

export function canaryDeploymentFor(
  fn: SlessFunction,
  build: BuildRecord,
  options: Omit<WorkloadOptions, 'enabled'>,
  share: { weight: number; since: number; replicas: number },
): KubeObject {
  const deployment = deploymentFor(fn, build, { ...options, enabled: true });
  const name = fn.metadata.name;
  const labels = { ...deployment.metadata.labels, [LABEL_CANARY_OF]: name };
  const spec = deployment.spec as {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> } };
  };
  spec.replicas = share.replicas;
  spec.selector = { matchLabels: { [LABEL_FUNCTION]: name, [LABEL_CANARY_OF]: name } };
  spec.template.metadata.labels = labels;
  return {
    ...deployment,
    metadata: {
      ...deployment.metadata,
      name: canaryName(name),
      labels,
      annotations: {
        ...deployment.metadata.annotations,
        ...shareAnnotations(share.weight, share.since),
      },
    },
  };
}

export function shareAnnotations(weight: number, since: number): Record<string, string> {
  return { [ANNOTATION_CANARY_WEIGHT]: String(weight), [ANNOTATION_CANARY_SINCE]: String(since) };
}

/** The share a Deployment gives a canary of `functionName`; undefined for anything else. */
export function canaryShareOf(
  deployment: KubeObject | undefined,
  functionName: string,
): CanaryShare | undefined {
  if (!deployment || deployment.metadata.deletionTimestamp) return undefined;
  if (deployment.metadata.labels?.[LABEL_CANARY_OF] !== functionName) return undefined;
  const annotations = deployment.metadata.annotations ?? {};
  const revision = annotations[ANNOTATION_REVISION];
  const weight = Number(annotations[ANNOTATION_CANARY_WEIGHT]);
  const since = Number(annotations[ANNOTATION_CANARY_SINCE]);
  if (!revision || !Number.isInteger(weight) || weight <= 0 || weight > 100 || !Number.isFinite(since))
    return undefined;
  return { revision, weight, since };
}

/**
 * The canary a function's route carries: its share, while its Deployment says so and at least one of
 * its pods is known ready (`endpointsOf` its revision); until then, the old revision takes everything.
 */
export function canaryRouteOf(
  deployment: KubeObject | undefined,
  functionName: string,
  endpointsOf: (revision: string) => readonly string[] | undefined,
): MirroredCanary | undefined {
  const share = canaryShareOf(deployment, functionName);
  if (!share) return undefined;
  const endpoints = endpointsOf(share.revision);
  return endpoints?.length ? { ...share, endpoints } : undefined;
}
