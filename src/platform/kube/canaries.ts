/**
 * Canaries on kube (`spec.rollout.canary`): the new revision runs in a Deployment of its own beside
 * the function's, whose annotations tell every proxy its share of requests (the proxies split them
 * themselves, see proxy/canary-split.ts); what is live of it, with the answers this replica's threads
 * counted, for the reconcile that judges it; and its end. Promoted: the function's own Deployment
 * rolls to the new revision, then the canary's is deleted. Aborted: the canary's is deleted, and every
 * request goes to the old revision once this replica's cache has seen it go.
 *
 * What is live is held in memory by the leader only. A canary Deployment without it (the controller
 * was killed, or the lease moved) is an orphan, deleted when a term begins, before any canary of that
 * term starts: the old revision serves alone until the reconcile starts the canary again at the step
 * its status names, as the local platform does after a restart.
 */
import type { Logger } from 'pino';
import { AnswerTally, type CanaryCounts } from '../../core/canary.js';
import { asError, RolloutError } from '../../core/errors.js';
import type { CanaryControl, DeployOptions, LiveCanary } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import {
  canaryDeploymentFor,
  canaryName,
  canaryReplicas,
  canaryShareOf,
  shareAnnotations,
} from './canary-manifests.js';
import { type KubeHttp, MERGE_PATCH } from './http.js';
import { LABEL_CANARY_OF, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { apply, deleteObject, getObject, type KubeObject, listObjects } from './objects.js';
import { DEPLOYMENT, objectPath } from './resource-types.js';
import { idleSecondsOf } from './scaler.js';

/** How often the threads' counts are taken while a canary runs: well within a check of the step. */
const COUNTS_EVERY_MS = 200;
/** The longest an abort waits for this replica's cache to see the canary go. */
const FORGET_WAIT_MS = 5000;

export interface KubeCanaryOptions {
  http: KubeHttp;
  logger: Logger;
  imagePullSecrets: readonly string[];
  /** Namespaces served; all when absent (where orphans are looked for). */
  namespaces?: readonly string[];
  /** A Deployment as the route cache holds it. */
  deploymentOf(namespace: string, name: string): KubeObject | undefined;
  /** What this replica's proxies counted of canaries since last asked (main thread and gateway). */
  takeCounts(): Promise<CanaryCounts[]>;
  /** Rolls the function's own Deployment to `build` and waits until it serves. */
  rollOut(fn: SlessFunction, build: BuildRecord, options: DeployOptions): Promise<void>;
  /** Waits until a Deployment's pods of `revision` are all available; RolloutError when they are not. */
  awaitRollout(namespace: string, deployment: string, revision: string): Promise<void>;
}

interface Live {
  fn: SlessFunction;
  build: BuildRecord;
  options: DeployOptions;
  weight: number;
  since: number;
  tally: AnswerTally;
  /** The route cache has held its Deployment: gone from there after, its pods are gone. */
  seen: boolean;
}

export class KubeCanaries {
  private readonly options: KubeCanaryOptions;
  private readonly live = new Map<string, Live>();
  /** This term's sweep of orphans; canaries of the term start after it. */
  private swept: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: KubeCanaryOptions) {
    this.options = options;
  }

  readonly control: CanaryControl = {
    start: (fn, build, options, weight) => this.start(fn, build, options, weight),
    live: (namespace, name) => this.liveOf(namespace, name),
    setWeight: (namespace, name, weight) => this.setWeight(namespace, name, weight),
    promote: (namespace, name) => this.promote(namespace, name),
    abort: (namespace, name) => this.abort(namespace, name),
  };

  /** A leader term begins: canary Deployments no one here knows of are orphans, deleted. */
  beginTerm(): void {
    this.swept ??= this.sweep();
  }

  /** A leader term ends: what this replica held of canaries is another leader's to decide now. */
  endTerm(): void {
    this.live.clear();
    this.swept = undefined;
    this.stopCounting();
  }

  /** A rollout at once replaces any canary of the function. */
  async dropFor(namespace: string, name: string): Promise<void> {
    const key = objectKey(namespace, name);
    const known = this.live.has(key) || this.options.deploymentOf(namespace, canaryName(name)) !== undefined;
    if (known) await this.abort(namespace, name);
  }

  /** The canary Deployment goes with its function. */
  async remove(namespace: string, name: string): Promise<void> {
    this.forget(objectKey(namespace, name));
    await this.deleteCanary(namespace, name);
  }

  private async start(
    fn: SlessFunction,
    build: BuildRecord,
    options: DeployOptions,
    weight: number,
  ): Promise<void> {
    const { namespace, name } = fn.metadata;
    const key = objectKey(namespace, name);
    this.beginTerm();
    await this.swept;
    const stable = this.options.deploymentOf(namespace, name);
    const available = (stable?.status as { availableReplicas?: number } | undefined)?.availableReplicas ?? 0;
    // Nothing serves to compare with (a first rollout, a function at zero, disabled): at once. A
    // function that scales to zero is reached through the scaler, one endpoint at a time: no split.
    if (!options.enabled || available === 0 || idleSecondsOf(fn) !== undefined)
      return this.options.rollOut(fn, build, options);
    if (this.live.has(key)) await this.abort(namespace, name);
    const existing = await getObject<KubeObject>(this.options.http, DEPLOYMENT, namespace, canaryName(name));
    // A Deployment of that name that is no canary of this function (another function's) is not taken over.
    if (existing && existing.metadata.labels?.[LABEL_CANARY_OF] !== name)
      throw new RolloutError(
        `cannot start the canary of ${options.revision}: Deployment ${namespace}/${canaryName(name)} exists and is not its canary`,
      );
    const since = Date.now();
    const live: Live = { fn, build, options, weight, since, tally: new AnswerTally(), seen: false };
    this.live.set(key, live);
    const stableReplicas = (stable?.spec as { replicas?: number } | undefined)?.replicas ?? 1;
    try {
      await apply(
        this.options.http,
        DEPLOYMENT,
        canaryDeploymentFor(
          fn,
          build,
          {
            revision: options.revision,
            imagePullSecrets: this.options.imagePullSecrets,
            ...(options.secretsHash ? { secretsHash: options.secretsHash } : {}),
          },
          { weight, since, replicas: canaryReplicas(stableReplicas, weight) },
        ),
        { force: true },
      );
      await this.options.awaitRollout(namespace, canaryName(name), options.revision);
    } catch (error) {
      if (this.live.get(key) === live) await this.abort(namespace, name).catch(() => undefined);
      throw error instanceof RolloutError ? error : new RolloutError(asError(error).message, error);
    }
    if (this.live.get(key) !== live) return;
    this.startCounting();
    this.options.logger.info({ function: key, revision: options.revision, weight }, 'canary started');
  }

  private liveOf(namespace: string, name: string): LiveCanary | undefined {
    const live = this.live.get(objectKey(namespace, name));
    if (!live) return undefined;
    const deployment = this.options.deploymentOf(namespace, canaryName(name));
    const share = canaryShareOf(deployment, name);
    if (share) live.seen = true;
    const available = (deployment?.status as { availableReplicas?: number } | undefined)?.availableReplicas;
    return {
      revision: live.options.revision,
      weight: live.weight,
      // Its pods all gone (crashing, deleted), or its Deployment deleted since the cache held it.
      alive: share ? (available ?? 0) > 0 : !live.seen,
      since: live.since,
      figures: live.tally.figures(),
    };
  }

  private setWeight(namespace: string, name: string, weight: number): void {
    const key = objectKey(namespace, name);
    const live = this.live.get(key);
    if (!live) return;
    live.weight = weight;
    live.since = Date.now();
    live.tally = new AnswerTally();
    const stable = this.options.deploymentOf(namespace, name);
    const stableReplicas = (stable?.spec as { replicas?: number } | undefined)?.replicas ?? 1;
    // The proxies split by what the Deployment says; answers under the share before are not counted.
    void this.options.http
      .request('PATCH', objectPath(DEPLOYMENT, namespace, canaryName(name)), {
        contentType: MERGE_PATCH,
        body: {
          metadata: { annotations: shareAnnotations(weight, live.since) },
          spec: { replicas: canaryReplicas(stableReplicas, weight) },
        },
      })
      .catch((error: unknown) =>
        this.options.logger.warn(
          { function: key, weight, err: asError(error).message },
          'canary share not written; the proxies keep the one before',
        ),
      );
  }

  private async promote(namespace: string, name: string): Promise<void> {
    const key = objectKey(namespace, name);
    const live = this.live.get(key);
    if (!live) return;
    // The function's own Deployment rolls first: the canary keeps its share until the new revision
    // serves there, so no request finds neither.
    await this.options.rollOut(live.fn, live.build, live.options);
    if (this.live.get(key) !== live) return;
    this.forget(key);
    await this.deleteCanary(namespace, name);
    this.options.logger.info({ function: key, revision: live.options.revision }, 'canary promoted');
  }

  private async abort(namespace: string, name: string): Promise<void> {
    this.forget(objectKey(namespace, name));
    await this.deleteCanary(namespace, name);
    // Every request goes to the old revision from here: this replica's proxies split by the cache.
    const deadline = Date.now() + FORGET_WAIT_MS;
    while (this.options.deploymentOf(namespace, canaryName(name)) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
  }

  private forget(key: string): void {
    this.live.delete(key);
    if (this.live.size === 0) this.stopCounting();
  }

  private async deleteCanary(namespace: string, name: string): Promise<void> {
    const existing = await getObject<KubeObject>(this.options.http, DEPLOYMENT, namespace, canaryName(name));
    if (existing?.metadata.labels?.[LABEL_CANARY_OF] === name)
      await deleteObject(this.options.http, DEPLOYMENT, namespace, canaryName(name));
  }

  /** Deletes every canary Deployment this replica holds nothing of. */
  private async sweep(): Promise<void> {
    const labels = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function' };
    for (const namespace of this.options.namespaces ?? [undefined]) {
      try {
        const list = await listObjects<KubeObject>(this.options.http, DEPLOYMENT, {
          ...(namespace ? { namespace } : {}),
          labels,
        });
        for (const deployment of list.items) {
          const of = deployment.metadata.labels?.[LABEL_CANARY_OF];
          const ns = deployment.metadata.namespace ?? '';
          if (!of || this.live.has(objectKey(ns, of))) continue;
          await deleteObject(this.options.http, DEPLOYMENT, ns, deployment.metadata.name);
          this.options.logger.info(
            { function: objectKey(ns, of), deployment: deployment.metadata.name },
            'orphan canary deleted: the old revision serves alone until its canary starts again',
          );
        }
      } catch (error) {
        // Not fatal: a canary that starts again replaces its orphan, and a rollout at once deletes it.
        this.options.logger.warn({ err: asError(error).message }, 'orphan canaries not swept');
      }
    }
  }

  private startCounting(): void {
    if (this.timer) return;
    let taking = false;
    this.timer = setInterval(() => {
      if (taking) return;
      taking = true;
      void this.options
        .takeCounts()
        .then((counts) => this.absorb(counts))
        .catch(() => undefined)
        .finally(() => {
          taking = false;
        });
    }, COUNTS_EVERY_MS);
    this.timer.unref();
  }

  private stopCounting(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Adds the threads' counts to their canary's step; counts of another step or revision are dropped. */
  private absorb(counts: readonly CanaryCounts[]): void {
    for (const count of counts) {
      const live = this.live.get(count.key);
      if (live?.options.revision !== count.revision || live.since !== count.since) continue;
      live.tally.absorb(count.requests, count.errors, count.latencies);
    }
  }
}
