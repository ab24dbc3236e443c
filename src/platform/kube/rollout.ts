/**
 * When a Deployment's rollout is done, the way `kubectl rollout status` decides it, and why it is
 * not when it fails: a function is Ready only once its new revision serves.
 */
import type { KubeObject } from './objects.js';

interface DeploymentSpec {
  replicas?: number;
}

interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}

export type RolloutProgress =
  | { state: 'done' }
  | { state: 'progressing'; message: string }
  | { state: 'failed'; message: string };

export function rolloutProgress(deployment: KubeObject): RolloutProgress {
  const spec = (deployment.spec ?? {}) as DeploymentSpec;
  const status = ((deployment as { status?: DeploymentStatus }).status ?? {}) as DeploymentStatus;
  const generation = deployment.metadata.generation ?? 1;
  const wanted = spec.replicas ?? 1;
  if ((status.observedGeneration ?? 0) < generation)
    return {
      state: 'progressing',
      message: `waiting for the Deployment controller to see generation ${generation}`,
    };
  const progressing = status.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded')
    return { state: 'failed', message: progressing.message ?? 'progress deadline exceeded' };
  const updated = status.updatedReplicas ?? 0;
  if (updated < wanted) return { state: 'progressing', message: `${updated} of ${wanted} replicas updated` };
  const old = (status.replicas ?? 0) - updated;
  // Old pods are still counted while they serve (a rollout keeps them until the new ones are
  // available) and while they terminate.
  if (old > 0)
    return { state: 'progressing', message: `${old} replicas of the previous revision still running` };
  const available = status.availableReplicas ?? 0;
  if (available < wanted)
    return { state: 'progressing', message: `${available} of ${wanted} updated replicas available` };
  return { state: 'done' };
}

interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  fieldsV1?: { 'f:spec'?: Record<string, unknown> };
}

/** The field managers that set the Deployment's `spec.replicas`. */
export function replicasOwners(deployment: KubeObject | undefined): string[] {
  const entries = (deployment?.metadata.managedFields ?? []) as ManagedFieldsEntry[];
  return entries
    .filter((e) => e.fieldsV1?.['f:spec'] !== undefined && 'f:replicas' in (e.fieldsV1['f:spec'] ?? {}))
    .map((e) => e.manager ?? '');
}

/**
 * Whether a manager other than `ours` (an HPA, `kubectl scale`) sets the Deployment's replicas. Its
 * value must then be left alone: applying ours would take the field over and undo the scaling.
 */
export function replicasManagedElsewhere(deployment: KubeObject | undefined, ours: string): boolean {
  return replicasOwners(deployment).some((manager) => manager !== ours);
}

interface ContainerState {
  waiting?: { reason?: string; message?: string };
  terminated?: { reason?: string; message?: string; exitCode?: number };
}

interface PodStatus {
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
  containerStatuses?: {
    name: string;
    state?: ContainerState;
    lastState?: ContainerState;
    restartCount?: number;
  }[];
}

/**
 * Why the pods of a revision are not available, from what the kubelet reported: the waiting reason
 * of a container (`CrashLoopBackOff`, `ImagePullBackOff`, …), how it last ended, or why the pod was
 * not scheduled. Empty when no pod says anything.
 */
export function podFailureReason(pods: readonly KubeObject[]): string {
  for (const pod of [...pods].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
    const status = ((pod as { status?: PodStatus }).status ?? {}) as PodStatus;
    for (const container of status.containerStatuses ?? []) {
      const waiting = container.state?.waiting;
      if (waiting?.reason && waiting.reason !== 'ContainerCreating') {
        const ended = container.lastState?.terminated;
        const last = ended
          ? ` (last exit: ${ended.reason ?? 'terminated'}, code ${ended.exitCode ?? '?'})`
          : '';
        return `pod ${pod.metadata.name}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}${last}`;
      }
      const terminated = container.state?.terminated;
      if (terminated?.reason)
        return `pod ${pod.metadata.name}: ${terminated.reason} (exit code ${terminated.exitCode ?? '?'})`;
      // Read between two crashes, a crash-looping container runs: its last exit says why.
      const ended = container.lastState?.terminated;
      if (ended && (container.restartCount ?? 0) > 0)
        return `pod ${pod.metadata.name}: restarted ${container.restartCount} times (last exit: ${ended.reason ?? 'terminated'}, code ${ended.exitCode ?? '?'})`;
    }
    const unscheduled = status.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
    if (unscheduled)
      return `pod ${pod.metadata.name}: ${unscheduled.reason ?? 'Unschedulable'}${unscheduled.message ? `: ${unscheduled.message}` : ''}`;
  }
  return '';
}
