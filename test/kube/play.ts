/**
 * The parts a kubelet, the Job and Deployment controllers or kaniko would play on the test API server
 * (there is none of them there). No vitest here: benchmarks play them too.
 */
import { type KubeHttp, MERGE_PATCH } from '../../src/platform/kube/http.js';
import { apply, getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE } from '../../src/platform/kube/resource-types.js';

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/**
 * Plays kaniko and the Job controller: marks the build Job Complete through the status subresource,
 * and creates the build Pod whose terminated container carries the digest in `message`, which is what
 * `--digest-file=/dev/termination-log` produces on a real kubelet.
 */
export async function markBuildSucceeded(
  http: KubeHttp,
  namespace: string,
  job: string,
  digest: string,
  /** The Job's completionTime (whole seconds, as Kubernetes writes it); default now. */
  completedAt?: string,
): Promise<void> {
  await playKanikoPushed(http, namespace, job, digest);
  await markJobComplete(http, namespace, job, completedAt);
}

/**
 * Plays kaniko alone: the build Pod whose kaniko container exited 0 with the pushed digest as its
 * termination message. The Job is left as it was: the Job controller has not marked it Complete yet.
 */
export async function playKanikoPushed(
  http: KubeHttp,
  namespace: string,
  job: string,
  digest: string,
): Promise<void> {
  const t = now();
  await http.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `${job}-pod`,
        labels: { 'sless.dev/build': job, 'batch.kubernetes.io/job-name': job },
      },
      spec: { restartPolicy: 'Never', containers: [{ name: 'kaniko', image: 'kaniko:test' }] },
    },
  });
  await http.request('PATCH', `/api/v1/namespaces/${namespace}/pods/${job}-pod/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        phase: 'Succeeded',
        containerStatuses: [
          {
            name: 'kaniko',
            image: 'kaniko:test',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: {
              terminated: { exitCode: 0, reason: 'Completed', message: digest, startedAt: t, finishedAt: t },
            },
          },
        ],
      },
    },
  });
}

/** Plays the Job controller for a failed kaniko run (no pod log: there is no kubelet to serve one). */
export async function markBuildFailed(
  http: KubeHttp,
  namespace: string,
  job: string,
  message: string,
): Promise<void> {
  const t = now();
  await http.request('PATCH', `/apis/batch/v1/namespaces/${namespace}/jobs/${job}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        startTime: t,
        failed: 1,
        conditions: [
          {
            type: 'FailureTarget',
            status: 'True',
            reason: 'BackoffLimitExceeded',
            message,
            lastTransitionTime: t,
            lastProbeTime: t,
          },
          {
            type: 'Failed',
            status: 'True',
            reason: 'BackoffLimitExceeded',
            message,
            lastTransitionTime: t,
            lastProbeTime: t,
          },
        ],
      },
    },
  });
}

/** Plays the Job controller for a FunctionJob run. */
export async function markJobComplete(
  http: KubeHttp,
  namespace: string,
  job: string,
  completedAt?: string,
): Promise<void> {
  const t = completedAt ?? now();
  await http.request('PATCH', `/apis/batch/v1/namespaces/${namespace}/jobs/${job}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        startTime: t,
        completionTime: t,
        succeeded: 1,
        conditions: [
          { type: 'SuccessCriteriaMet', status: 'True', lastTransitionTime: t, lastProbeTime: t },
          { type: 'Complete', status: 'True', lastTransitionTime: t, lastProbeTime: t },
        ],
      },
    },
  });
}

/** Plays the Deployment controller and kubelet: the Deployment reports its replicas available. */
export async function markDeploymentAvailable(
  http: KubeHttp,
  namespace: string,
  name: string,
  /** The Deployment as just seen (a watch event), which saves reading it again. */
  seen?: KubeObject,
): Promise<void> {
  const deployment =
    seen ??
    (await getObject<KubeObject>(
      http,
      { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
      namespace,
      name,
    ));
  const replicas = (deployment?.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  await http.request('PATCH', `/apis/apps/v1/namespaces/${namespace}/deployments/${name}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        observedGeneration: deployment?.metadata.generation ?? 1,
        replicas,
        updatedReplicas: replicas,
        readyReplicas: replicas,
        availableReplicas: replicas,
      },
    },
  });
}

/** Whether a Deployment's status lags its spec: not yet rolled out and available, as pods would make it. */
export function deploymentLags(deployment: KubeObject): boolean {
  const status = (deployment as { status?: { observedGeneration?: number; availableReplicas?: number } })
    .status;
  const replicas = (deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  return (
    status?.observedGeneration !== deployment.metadata.generation ||
    (status?.availableReplicas ?? 0) !== replicas
  );
}

/**
 * Plays the Deployment controller and kubelet for a whole namespace, for tests about something else:
 * every Deployment whose status lags its spec is marked rolled out and available, as healthy pods
 * would make it. Returns the function that stops playing.
 */
export function playHealthyKubelet(http: KubeHttp, namespace: string, everyMs = 100): () => void {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      try {
        const list = await http.request<{ items: KubeObject[] }>(
          'GET',
          `/apis/apps/v1/namespaces/${namespace}/deployments`,
        );
        for (const d of list.items ?? [])
          if (deploymentLags(d)) await markDeploymentAvailable(http, namespace, d.metadata.name);
      } catch {
        // The namespace or a Deployment went away meanwhile: look again next round.
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return () => {
    stopped = true;
  };
}

/**
 * Plays the EndpointSlice controller for one Deployment's Service: its slice `{name}-test` lists one
 * ready endpoint (at a fixed address) when `ready`, and none otherwise.
 */
export async function publishPlayedEndpoint(
  http: KubeHttp,
  namespace: string,
  deployment: KubeObject,
  ready: boolean,
): Promise<void> {
  const name = deployment.metadata.name;
  await apply(http, ENDPOINT_SLICE, {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${name}-test`,
      namespace,
      // As the EndpointSlice controller does: the Service's labels, and its name.
      labels: { ...deployment.metadata.labels, 'kubernetes.io/service-name': name },
    },
    addressType: 'IPv4',
    endpoints: ready ? [{ addresses: ['10.96.7.7'], conditions: { ready: true } }] : [],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  });
}

/**
 * Plays the EndpointSlice controller for a namespace: one ready endpoint (at a fixed address) per
 * Deployment with replicas, none at 0 or while `podsReady()` says no. Returns the function that stops.
 */
export function playEndpointSlices(
  http: KubeHttp,
  namespace: string,
  options: { everyMs?: number; podsReady?: () => boolean } = {},
): () => void {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      try {
        const list = await listObjects<KubeObject>(http, DEPLOYMENT, { namespace });
        for (const d of list.items) {
          const running =
            ((d.spec as { replicas?: number }).replicas ?? 1) > 0 && (options.podsReady?.() ?? true);
          await publishPlayedEndpoint(http, namespace, d, running);
        }
      } catch {
        // The API server is down, or a Deployment went away: look again next round.
      }
      await new Promise((r) => setTimeout(r, options.everyMs ?? 100));
    }
  })();
  return () => {
    stopped = true;
  };
}

/** Plays the kubelet: a pod of the revision whose container exited with 1 and is backing off. */
export async function playCrashLoopingPod(
  http: KubeHttp,
  namespace: string,
  name: string,
  fn: string,
  revision: string,
): Promise<void> {
  await http.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        labels: { 'sless.dev/function': fn },
        annotations: { 'sless.dev/revision': revision },
      },
      spec: { containers: [{ name: 'function', image: 'function:test' }] },
    },
  });
  const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await http.request('PATCH', `/api/v1/namespaces/${namespace}/pods/${name}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        phase: 'Running',
        containerStatuses: [
          {
            name: 'function',
            image: 'function:test',
            imageID: '',
            ready: false,
            restartCount: 3,
            state: {
              waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s restarting failed container' },
            },
            lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: t, finishedAt: t } },
          },
        ],
      },
    },
  });
}

/**
 * Plays the kubelet: pod `name`'s one container started at `ip`, and no probe has passed yet (Ready
 * False), as a pod is between its container's start and its first successful readiness probe.
 */
export async function markPodStarted(
  http: KubeHttp,
  namespace: string,
  name: string,
  ip: string,
): Promise<void> {
  await http.request('PATCH', `/api/v1/namespaces/${namespace}/pods/${name}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        phase: 'Running',
        podIP: ip,
        podIPs: [{ ip }],
        conditions: [{ type: 'Ready', status: 'False' }],
        containerStatuses: [
          {
            name: 'function',
            image: 'function:test',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { running: { startedAt: now() } },
          },
        ],
      },
    },
  });
}
