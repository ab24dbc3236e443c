/**
 * WorkloadPlatform on Kubernetes: one Deployment and one Service per Function, in its namespace, and
 * a second Deployment while a canary runs (see canaries.ts).
 */
import type { CanaryCounts } from '../../core/canary.js';
import { RolloutError } from '../../core/errors.js';
import type { CanaryControl, WorkloadObservation, WorkloadPlatform } from '../../core/interfaces.js';
import { type BuildRecord, FIELD_MANAGER, type SlessFunction } from '../../core/resources.js';
import { KubeCanaries } from './canaries.js';
import { canaryName } from './canary-manifests.js';
import { type ChangeSignal, deploymentKey } from './change-signal.js';
import type { KubeHttp } from './http.js';
import {
  ANNOTATION_REVISION,
  LABEL_COMMIT_OF,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from './labels.js';
import { apply, deleteObject, getObject, type KubeObject, listObjects } from './objects.js';
import { DEPLOYMENT, POD, SERVICE } from './resource-types.js';
import { podFailureReason, replicasManagedElsewhere, replicasOwners, rolloutProgress } from './rollout.js';
import type { KubeRouteCache } from './route-cache.js';
import { idleSecondsOf, scalerOwnsReplicas } from './scaler.js';
import { deploymentFor, serviceFor, serviceName } from './workload-manifests.js';

/** The pods of a revision that answer, and word when they change (the route cache's, see starting-pods.ts). */
type AnsweringPods = Pick<KubeRouteCache, 'answeringPods' | 'onPodsAnswering'>;

/** With Deployment changes signalled, a rollout still reads its Deployment this often. */
const ROLLOUT_FALLBACK_MS = 10_000;

export class KubeWorkloads implements WorkloadPlatform {
  private readonly http: KubeHttp;
  private readonly imagePullSecrets: readonly string[];
  private readonly prepareNamespace: ((namespace: string) => Promise<void>) | undefined;
  private readonly rolloutDeadlineMs: number;
  private readonly pollMs: number;
  private readonly changes: ChangeSignal | undefined;
  private readonly deploymentOf: ((namespace: string, name: string) => KubeObject | undefined) | undefined;
  private readonly answeringPods: AnsweringPods | undefined;
  /** Canary rollouts, given the route cache and the proxies' counts; absent: every rollout at once. */
  readonly canaries: KubeCanaries | undefined;
  readonly canary: CanaryControl | undefined;

  /**
   * `prepareNamespace` readies each namespace deployed to: pull secret (or its pods cannot pull
   * images), NetworkPolicy.
   * A revision whose pods are not all updated and available within `rolloutDeadlineMs` (default
   * 3 min) failed; `pollMs` (default 1 s) is how often the Deployment is read meanwhile.
   */
  constructor(options: {
    http: KubeHttp;
    imagePullSecrets?: readonly string[];
    prepareNamespace?: (namespace: string) => Promise<void>;
    rolloutDeadlineMs?: number;
    pollMs?: number;
    /** With the drift watch's Deployment changes, a rollout reads its Deployment when it moves. */
    changes?: ChangeSignal;
    /** A function's Deployment as a watch cache holds it, for what status reports of it. */
    deploymentOf?: (namespace: string, name: string) => KubeObject | undefined;
    /**
     * How many pods of a function's revision answer now, the kubelet's probe or not (see
     * starting-pods.ts): a rollout whose every new replica answers is done, and `/fn/` moves to it,
     * before the kubelet and the Deployment controller have said so.
     */
    answeringPods?: AnsweringPods;
    /** With these, `spec.rollout.canary` splits requests between two Deployments. */
    canaries?: {
      logger: import('pino').Logger;
      namespaces?: readonly string[] | undefined;
      takeCounts(): Promise<CanaryCounts[]>;
    };
  }) {
    this.deploymentOf = options.deploymentOf;
    this.answeringPods = options.answeringPods;
    // A rollout waits on its Deployment's key: a pod of it that starts answering is such a change.
    options.answeringPods?.onPodsAnswering((namespace, fn) => {
      for (const name of [fn, canaryName(fn)]) this.changes?.notify(deploymentKey(namespace, name));
    });
    this.changes = options.changes;
    this.http = options.http;
    this.imagePullSecrets = options.imagePullSecrets ?? [];
    this.prepareNamespace = options.prepareNamespace;
    this.rolloutDeadlineMs = options.rolloutDeadlineMs ?? 180_000;
    this.pollMs = options.pollMs ?? 1000;
    const deploymentOf = options.deploymentOf;
    this.canaries =
      options.canaries && deploymentOf
        ? new KubeCanaries({
            http: this.http,
            logger: options.canaries.logger,
            imagePullSecrets: this.imagePullSecrets,
            ...(options.canaries.namespaces ? { namespaces: options.canaries.namespaces } : {}),
            deploymentOf,
            takeCounts: options.canaries.takeCounts,
            rollOut: (fn, build, deployOptions) => this.rollOut(fn, build, deployOptions),
            awaitRollout: (namespace, deployment, revision) =>
              this.awaitRollout(namespace, deployment, revision),
          })
        : undefined;
    this.canary = this.canaries?.control;
  }

  /** What status shows of the function's Deployment, from the watch cache: no request is made. */
  observe(fn: SlessFunction): WorkloadObservation | undefined {
    const deployment = this.deploymentOf?.(fn.metadata.namespace, fn.metadata.name);
    if (!deployment || deployment.metadata.deletionTimestamp) return undefined;
    const spec = deployment.spec as { replicas?: number } | undefined;
    const status = deployment.status as { readyReplicas?: number } | undefined;
    // A pod that answers serves before the kubelet calls it ready (see starting-pods.ts).
    const revision = deployment.metadata.annotations?.[ANNOTATION_REVISION];
    const answering = revision
      ? (this.answeringPods?.answeringPods(fn.metadata.namespace, fn.metadata.name, revision) ?? 0)
      : 0;
    return {
      instances: { desired: spec?.replicas ?? 1, ready: Math.max(status?.readyReplicas ?? 0, answering) },
    };
  }

  /**
   * Applies Service and Deployment, then waits until the revision serves: every replica updated and
   * available as the Deployment controller says, or every replica it wants running the revision and
   * answering already (see `answers`). The old pods serve meanwhile (maxUnavailable 0), and
   * keep serving when the new ones never become available, which rejects with a RolloutError naming
   * the pods' reason. Applying what is already there changes nothing, so this also repairs drift: a
   * Deployment or Service deleted or edited by hand is put back.
   */
  async deploy(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean; secretsHash?: string },
  ): Promise<void> {
    // A rollout at once replaces any canary in progress (its spec.rollout was taken out, say).
    await this.canaries?.dropFor(fn.metadata.namespace, fn.metadata.name);
    await this.rollOut(fn, build, options);
  }

  /** The function's own Deployment (and Service) to `build`, awaited until it serves. */
  private async rollOut(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean; secretsHash?: string },
  ): Promise<void> {
    // Before the Deployment: its pods must be able to pull from the first try.
    await this.prepareNamespace?.(fn.metadata.namespace);
    // Owned by design: the controller's Service and Deployment; an edit by hand is taken back.
    await apply(this.http, SERVICE, serviceFor(fn), { force: true });
    const deployment = deploymentFor(fn, build, { ...options, imagePullSecrets: this.imagePullSecrets });
    // Something else scales this function (an HPA, kubectl scale): its replica count stands. A
    // disabled function still goes to 0, which is what disabling means.
    const existing = await getObject<KubeObject>(
      this.http,
      DEPLOYMENT,
      fn.metadata.namespace,
      fn.metadata.name,
    );
    const spec = deployment.spec as { replicas?: number };
    if (options.enabled && existing && scalerOwnsReplicas(fn)) {
      // The scaler sets the count of a function that scales to zero, through the scale subresource,
      // which takes the field from us and (as of Kubernetes 1.37) records no owner in its place. So:
      // once it is not ours, it is the scaler's, and left out; while it is still ours (nothing scaled
      // since the Deployment was made), the count there is kept, since dropping the field from our
      // apply would reset it to the default.
      if (replicasOwners(existing).includes(FIELD_MANAGER))
        spec.replicas = (existing.spec as { replicas?: number } | undefined)?.replicas ?? spec.replicas;
      else delete spec.replicas;
    } else if (options.enabled && replicasManagedElsewhere(existing, FIELD_MANAGER)) delete spec.replicas;
    await apply(this.http, DEPLOYMENT, deployment, { force: true });
    await this.awaitRollout(fn.metadata.namespace, fn.metadata.name, options.revision);
  }

  /** The revision is already rolled out: put back what drifted and wait until it serves. */
  ensure(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean; secretsHash?: string },
  ): Promise<void> {
    return this.deploy(fn, build, options);
  }

  /** `name` is the Deployment's: the function's own, or its canary's. */
  private async awaitRollout(namespace: string, name: string, revision: string): Promise<void> {
    const deadline = Date.now() + this.rolloutDeadlineMs;
    for (;;) {
      // Asked before the read: a change between the read and the wait must not wait for the fallback.
      const moved = this.changes?.next(deploymentKey(namespace, name), ROLLOUT_FALLBACK_MS);
      const deployment = await getObject<KubeObject>(this.http, DEPLOYMENT, namespace, name);
      // Not a verdict on the revision: the retry applies it again.
      if (!deployment) throw new Error(`Deployment ${namespace}/${name} disappeared during its rollout`);
      const progress = rolloutProgress(deployment);
      if (
        progress.state === 'done' ||
        (progress.state === 'progressing' && this.answers(deployment, revision))
      )
        return;
      if (progress.state === 'failed' || Date.now() >= deadline) {
        const pods = await listObjects<KubeObject>(this.http, POD, {
          namespace,
          labels: { [LABEL_FUNCTION]: name },
        });
        const ofRevision = pods.items.filter(
          (p) => p.metadata.annotations?.[ANNOTATION_REVISION] === revision,
        );
        const why = podFailureReason(ofRevision) || progress.message;
        throw new RolloutError(
          `revision ${revision} not available after ${Math.round(this.rolloutDeadlineMs / 1000)}s: ${why}`,
        );
      }
      await (moved ?? new Promise((resolve) => setTimeout(resolve, this.pollMs)));
    }
  }

  /**
   * Whether every replica the Deployment wants runs `revision` and answers: the rollout is done as far
   * as requests go, although the old replicas are still being scaled down.
   */
  private answers(deployment: KubeObject, revision: string): boolean {
    if (!this.answeringPods) return false;
    const { namespace, name, annotations, labels } = deployment.metadata;
    const generation = deployment.metadata.generation ?? 1;
    const status = (deployment as { status?: { observedGeneration?: number } }).status;
    if ((status?.observedGeneration ?? 0) < generation || annotations?.[ANNOTATION_REVISION] !== revision)
      return false;
    const wanted = (deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1;
    const fn = labels?.[LABEL_FUNCTION] ?? name;
    return wanted > 0 && this.answeringPods.answeringPods(namespace ?? '', fn, revision) >= wanted;
  }

  /**
   * Deletes both explicitly, and the commit revisions' (found by label); owner references would
   * too, but only where a garbage collector runs.
   */
  async remove(namespace: string, name: string): Promise<void> {
    await this.canaries?.remove(namespace, name);
    await deleteObject(this.http, DEPLOYMENT, namespace, name);
    await deleteObject(this.http, SERVICE, namespace, serviceName(name));
    const byCommit = { namespace, labels: { [LABEL_COMMIT_OF]: name, [LABEL_MANAGED_BY]: MANAGED_BY } };
    const [deployments, services] = await Promise.all([
      listObjects<KubeObject>(this.http, DEPLOYMENT, byCommit),
      listObjects<KubeObject>(this.http, SERVICE, byCommit),
    ]);
    for (const o of deployments.items) await deleteObject(this.http, DEPLOYMENT, namespace, o.metadata.name);
    for (const o of services.items) await deleteObject(this.http, SERVICE, namespace, o.metadata.name);
  }

  /** A scale-to-zero function whose Deployment runs no replica now. */
  async scaledToZero(fn: SlessFunction): Promise<boolean | undefined> {
    if (idleSecondsOf(fn) === undefined) return undefined;
    const { namespace, name } = fn.metadata;
    const deployment = await getObject<KubeObject>(this.http, DEPLOYMENT, namespace, name);
    return (deployment?.spec as { replicas?: number } | undefined)?.replicas === 0;
  }

  /** Read from the Deployment itself, the durable record of what was rolled out. */
  async currentRevision(namespace: string, name: string): Promise<string | undefined> {
    const deployment = await getObject<KubeObject>(this.http, DEPLOYMENT, namespace, name);
    return deployment?.metadata.annotations?.[ANNOTATION_REVISION];
  }
}
