/**
 * The Deployment and Service of one Function, as pure data: deterministic (sorted env, stable names)
 * so that re-applying an unchanged function is a no-op and never rolls pods.
 */

import { memoryMbOf, replicasOf, timeoutSecOf } from '../../core/defaults.js';
import { boundedName } from '../../core/naming.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { API_VERSION } from '../../core/schemas.js';
import { secretRefsOf } from '../../secrets/references.js';
import {
  ANNOTATION_REVISION,
  FUNCTION_PORT,
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from './labels.js';
import type { KubeObject, OwnerReference } from './objects.js';

/** The pod template's hash of the secret values it uses: a rotation changes it, so the pods roll. */
export const ANNOTATION_SECRETS_HASH = 'sless.dev/secrets-hash';

/** A container variable: a value, or a key of a Secret in the pod's own namespace. */
export type EnvVar =
  | { name: string; value: string }
  | { name: string; valueFrom: { secretKeyRef: { name: string; key: string } } };

export interface WorkloadOptions {
  revision: string;
  enabled: boolean;
  /** Secrets the function's namespace pulls images with; without them its pods end in ImagePullBackOff. */
  imagePullSecrets: readonly string[];
  /** The hash of the referenced secret values (never the values); unset when none are referenced. */
  secretsHash?: string;
}

/**
 * Service names must start with a letter (DNS-1035) while function names may start with a digit, so
 * those get an `fn-` prefix. Everything that addresses a function's Service goes through this.
 */
export function serviceName(functionName: string): string {
  return /^[a-z]/.test(functionName) ? functionName : boundedName(['fn'], functionName);
}

export function ownerReferenceTo(fn: SlessFunction): OwnerReference {
  if (!fn.metadata.uid)
    throw new Error(`function ${fn.metadata.name} has no uid; read it from the API first`);
  return {
    apiVersion: API_VERSION,
    kind: 'Function',
    name: fn.metadata.name,
    uid: fn.metadata.uid,
    controller: true,
  };
}

export function functionLabels(fn: SlessFunction): Record<string, string> {
  return {
    'app.kubernetes.io/name': fn.metadata.name,
    [LABEL_COMPONENT]: 'function',
    [LABEL_FUNCTION]: fn.metadata.name,
    [LABEL_MANAGED_BY]: MANAGED_BY,
  };
}

export function sortedEnv(env: Record<string, unknown> | undefined): { name: string; value: string }[] {
  return Object.entries(env ?? {})
    .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => ({ name, value }));
}

/**
 * The variables every runtime reads, after the user's own (which may not override them). A secret
 * reference becomes a `secretKeyRef` the kubelet resolves: its value is in no object sless writes.
 */
export function runtimeEnv(fn: SlessFunction): EnvVar[] {
  const reserved = new Set([
    'PORT',
    'SLESS_ENTRYPOINT',
    'SLESS_FUNCTION_NAME',
    'SLESS_NAMESPACE',
    'SLESS_TIMEOUT_SEC',
  ]);
  const secret: EnvVar[] = secretRefsOf(fn).env.map((ref) => ({
    name: ref.env,
    valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } },
  }));
  const user: EnvVar[] = [...sortedEnv(fn.spec.env), ...secret].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  return [
    ...user.filter((e) => !reserved.has(e.name)),
    { name: 'PORT', value: String(FUNCTION_PORT) },
    { name: 'SLESS_ENTRYPOINT', value: fn.spec.entrypoint },
    { name: 'SLESS_FUNCTION_NAME', value: fn.metadata.name },
    { name: 'SLESS_NAMESPACE', value: fn.metadata.namespace },
    { name: 'SLESS_TIMEOUT_SEC', value: String(timeoutSecOf(fn)) },
  ];
}

/** `spec.secrets` as read-only Secret volumes, one file per key, readable by the function only. */
export function secretVolumes(fn: SlessFunction): {
  volumes: Record<string, unknown>[] | undefined;
  mounts: Record<string, unknown>[] | undefined;
} {
  const list = secretRefsOf(fn).volumes;
  if (list.length === 0) return { volumes: undefined, mounts: undefined };
  return {
    volumes: list.map((s, i) => ({
      name: `secret-${i}`,
      secret: { secretName: s.name, defaultMode: 0o444 },
    })),
    mounts: list.map((s, i) => ({
      name: `secret-${i}`,
      mountPath: s.mountPath,
      readOnly: true,
    })),
  };
}

export function resourcesFor(fn: SlessFunction): {
  requests: Record<string, string>;
  limits: Record<string, string>;
} {
  const memory = `${memoryMbOf(fn)}Mi`;
  return { requests: { cpu: '50m', memory }, limits: { memory } };
}

/** How long a replaced pod keeps serving before it is told to stop (see the preStop hook). */
export const PRE_STOP_SLEEP_SECONDS = 5;

/** How long a new container may take to first answer /healthz before the kubelet restarts it. */
const STARTUP_BUDGET_SECONDS = 70;

export function deploymentFor(fn: SlessFunction, build: BuildRecord, options: WorkloadOptions): KubeObject {
  if (!build.image) throw new Error(`build ${build.buildKey} of ${fn.metadata.name} has no image`);
  const labels = functionLabels(fn);
  const timeoutSec = timeoutSecOf(fn);
  const secrets = secretVolumes(fn);
  const templateAnnotations: Record<string, string> = { [ANNOTATION_REVISION]: options.revision };
  if (options.secretsHash) templateAnnotations[ANNOTATION_SECRETS_HASH] = options.secretsHash;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: fn.metadata.name,
      namespace: fn.metadata.namespace,
      labels,
      annotations: { [ANNOTATION_REVISION]: options.revision },
      ownerReferences: [ownerReferenceTo(fn)],
    },
    spec: {
      // enabled:false scales to 0 in place: nothing is recreated, so enabling it again needs no rebuild.
      replicas: options.enabled ? replicasOf(fn) : 0,
      revisionHistoryLimit: 3,
      selector: { matchLabels: { [LABEL_FUNCTION]: fn.metadata.name } },
      // The old pods serve until the new ones are ready: a crashing version never takes the function down.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: {
          labels,
          // A new revision changes the template, so the Deployment rolls by itself (no restartedAt trick).
          annotations: templateAnnotations,
        },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          // The preStop sleep, then in-flight requests (up to the timeout) and a little slack.
          terminationGracePeriodSeconds: PRE_STOP_SLEEP_SECONDS + timeoutSec + 5,
          ...(options.imagePullSecrets.length > 0
            ? { imagePullSecrets: options.imagePullSecrets.map((name) => ({ name })) }
            : {}),
          ...(secrets.volumes ? { volumes: secrets.volumes } : {}),
          containers: [
            {
              name: 'function',
              // Tag = commit SHA, pinned by digest: never :latest, so a node never runs a stale cached image.
              image: build.image,
              imagePullPolicy: 'IfNotPresent',
              ports: [{ name: 'http', containerPort: FUNCTION_PORT, protocol: 'TCP' }],
              env: runtimeEnv(fn),
              ...(secrets.mounts ? { volumeMounts: secrets.mounts } : {}),
              resources: resourcesFor(fn),
              // The kubelet probes readiness at once only while it syncs the pod just after the
              // container started, then every periodSeconds: a handler still loading then (imports,
              // a slow machine) waited up to 5 s more to be Ready. A startup probe asks every second
              // until /healthz first answers, and the kubelet then probes readiness at once. It stops
              // after that first answer, so the steady cost is the readiness probe's. Its budget is
              // that of the liveness probe it stands in for while starting (10 s + 3 × 20 s): a
              // handler that takes longer to load is restarted, as before.
              startupProbe: {
                httpGet: { path: '/healthz', port: FUNCTION_PORT },
                periodSeconds: 1,
                failureThreshold: STARTUP_BUDGET_SECONDS,
              },
              readinessProbe: {
                httpGet: { path: '/healthz', port: FUNCTION_PORT },
                // A function started from zero has requests waiting for it: a probe that comes
                // before the server listens must not cost them a whole period.
                periodSeconds: fn.spec.scaleToZero ? 1 : 5,
                failureThreshold: 2,
              },
              livenessProbe: {
                httpGet: { path: '/healthz', port: FUNCTION_PORT },
                initialDelaySeconds: 10,
                periodSeconds: 20,
                timeoutSeconds: 5,
                failureThreshold: 3,
              },
              // A terminating pod leaves the Service's endpoints at once, but kube-proxy on every node
              // (and other proxies) learn it a moment later; until then they still send it new
              // connections. Waiting before SIGTERM keeps it serving them: rollouts drop no request.
              lifecycle: { preStop: { sleep: { seconds: PRE_STOP_SLEEP_SECONDS } } },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    },
  };
}

export function serviceFor(fn: SlessFunction): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(fn.metadata.name),
      namespace: fn.metadata.namespace,
      labels: functionLabels(fn),
      ownerReferences: [ownerReferenceTo(fn)],
    },
    spec: {
      type: 'ClusterIP',
      selector: { [LABEL_FUNCTION]: fn.metadata.name },
      ports: [{ name: 'http', port: FUNCTION_PORT, targetPort: FUNCTION_PORT, protocol: 'TCP' }],
    },
  };
}
