/**
 * The Deployment and Service that serve `/fn/{ns}/{name}@{commit}` on kube, as pure data: the kept
 * build at that commit with the Function's current settings (a build keeps the code, not the
 * manifest), one replica. The Deployment carries the function's labels, so the route cache and build
 * garbage collection (which keeps every image a function Deployment runs) see it, and the commit
 * labels, by which the drift watch leaves it alone. Its pods do not carry the function label, so the
 * function's own Service and Deployment never select them, and a plain `/fn/{ns}/{name}` never
 * reaches an old commit: a Service of their own selects them by the commit labels.
 */
import { boundedName } from '../../core/naming.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import {
  ANNOTATION_LAST_REQUEST,
  FUNCTION_PORT,
  LABEL_AT_COMMIT,
  LABEL_COMMIT_OF,
  LABEL_FUNCTION,
} from './labels.js';
import type { KubeObject } from './objects.js';
import { deploymentFor, functionLabels, ownerReferenceTo, serviceName } from './workload-manifests.js';

/** `{fn}-at-{sha12}`: derived from the URL's own 12 digits, so any replica finds it by name. */
export function commitDeploymentName(functionName: string, commit: string): string {
  return boundedName([functionName], `at-${commit.slice(0, 12)}`);
}

/** What selects a commit revision's pods: never the function label. */
export function commitSelector(functionName: string, commit: string): Record<string, string> {
  return { [LABEL_COMMIT_OF]: functionName, [LABEL_AT_COMMIT]: commit };
}

/** The function and full commit a Deployment serves by commit; undefined for any other Deployment. */
export function commitRevisionOf(deployment: KubeObject): { fn: string; commit: string } | undefined {
  const labels = deployment.metadata.labels ?? {};
  const fn = labels[LABEL_COMMIT_OF];
  const commit = labels[LABEL_AT_COMMIT];
  return fn && commit ? { fn, commit } : undefined;
}

/** The revision annotation of a commit revision's pods. */
export function commitRevision(build: BuildRecord): string {
  return `${build.buildKey.slice(0, 12)}-at-${build.commit.slice(0, 12)}`;
}

export function commitDeploymentFor(
  fn: SlessFunction,
  build: BuildRecord,
  options: { imagePullSecrets: readonly string[]; lastRequest: string },
): KubeObject {
  const base = deploymentFor(fn, build, {
    revision: commitRevision(build),
    enabled: true,
    imagePullSecrets: options.imagePullSecrets,
  });
  const selector = commitSelector(fn.metadata.name, build.commit);
  const { [LABEL_FUNCTION]: _function, ...podLabels } = functionLabels(fn);
  const spec = base.spec as {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> } };
  };
  spec.replicas = 1;
  // Started for a request that waits for it, as a function at zero is: probed every second.
  const container = (base.spec as { template: { spec: { containers: { readinessProbe?: object }[] } } })
    .template.spec.containers[0];
  if (container?.readinessProbe) container.readinessProbe = { ...container.readinessProbe, periodSeconds: 1 };
  spec.selector = { matchLabels: selector };
  // The NetworkPolicy still selects them (component and managed-by), the function's Service does not.
  spec.template.metadata.labels = { ...podLabels, ...selector };
  return {
    ...base,
    metadata: {
      ...base.metadata,
      name: commitDeploymentName(fn.metadata.name, build.commit),
      labels: { ...functionLabels(fn), ...selector },
      annotations: { ...base.metadata.annotations, [ANNOTATION_LAST_REQUEST]: options.lastRequest },
    },
  };
}

/**
 * Its own Service, labelled as a function's (the EndpointSlice controller copies the labels, which
 * the route cache's slice watch selects on), selecting the commit's pods only.
 */
export function commitServiceFor(fn: SlessFunction, commit: string): KubeObject {
  const selector = commitSelector(fn.metadata.name, commit);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(commitDeploymentName(fn.metadata.name, commit)),
      namespace: fn.metadata.namespace,
      labels: { ...functionLabels(fn), ...selector },
      ownerReferences: [ownerReferenceTo(fn)],
    },
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [{ name: 'http', port: FUNCTION_PORT, targetPort: FUNCTION_PORT, protocol: 'TCP' }],
    },
  };
}
