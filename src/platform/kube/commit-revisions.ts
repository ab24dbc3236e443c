/**
 * `/fn/{ns}/{name}@{commit}` on kube: the kept build made at that commit, in a Deployment of its own
 * (commit-manifests.ts) created on the first request, the request held meanwhile as for a function
 * at zero (the scaler's activations); the leader's sweep deletes it again once idle, and the least
 * recently used beyond a few per function (scaler.ts). The commit the function serves now is its
 * plain route. A build that was never made, or was collected, answers 404 in the local platform's
 * words.
 */
import { timeoutSecOf } from '../../core/defaults.js';
import { asError } from '../../core/errors.js';
import type { FunctionRef, RouteState, StoredBuild, UnavailableRoute } from '../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { commitMatches, noKeptBuildMessage } from '../../core/revision-ref.js';
import {
  commitDeploymentFor,
  commitDeploymentName,
  commitRevisionOf,
  commitSelector,
  commitServiceFor,
} from './commit-manifests.js';
import type { KubeHttp } from './http.js';
import { apply } from './objects.js';
import { DEPLOYMENT, SERVICE } from './resource-types.js';
import type { KubeRouteCache } from './route-cache.js';
import { ActivationError, commitIdleSecondsOf, type KubeScaler } from './scaler.js';

export interface KubeCommitRevisionsOptions {
  http: KubeHttp;
  cache: KubeRouteCache;
  scaler: KubeScaler;
  /** The builds kept of one function (the build archive's list). */
  keptBuilds(ref: FunctionRef): Promise<StoredBuild[]>;
  imagePullSecrets?: readonly string[];
  /** As KubeRouteOptions: where a request goes in tests that play no endpoints. */
  originOf?: (namespace: string, name: string) => string;
  endpointOrigin?: (address: string) => string;
}

const unavailable = (status: UnavailableRoute['status'], message: string): RouteState => ({
  state: 'unavailable',
  status,
  message,
});

export class KubeCommitRevisions {
  private readonly options: KubeCommitRevisionsOptions;

  constructor(options: KubeCommitRevisionsOptions) {
    this.options = options;
  }

  /** `plain` resolves the function's own route: taken when the commit asked for is the one serving. */
  async resolve(
    namespace: string,
    name: string,
    commit: string,
    plain: () => Promise<RouteState>,
  ): Promise<RouteState> {
    const { cache, scaler } = this.options;
    const fn = cache.fn(namespace, name);
    if (!fn) return { state: 'unknown' };
    // Worded as the plain route words it, and as the local platform does at its commit URLs.
    if (fn.status?.phase === 'Disabled') return unavailable(503, `function ${namespace}/${name} is disabled`);
    const serving = fn.status?.servingRevision ? fn.status.servingCommit : undefined;
    if (serving && commitMatches(serving, commit)) return plain();
    const deployment = commitDeploymentName(name, commit);
    const label = `${namespace}/${name}@${commit}`;
    let origin = await this.runningOrigin(namespace, deployment, commit);
    if (!origin) {
      if (!cache.connected())
        return unavailable(
          503,
          `function ${label} cannot be started while the control plane is unreachable; try again`,
        );
      try {
        const build = await this.keptBuild(fn, commit);
        if (!build) return unavailable(404, noKeptBuildMessage(namespace, name, commit));
        origin = await scaler.activateDeployment(
          {
            namespace,
            deployment,
            podLabels: commitSelector(name, build.commit),
            timeoutMs: scaler.activationTimeoutMsOf(fn),
            label,
          },
          () => this.create(fn, build),
        );
      } catch (error) {
        const message = asError(error).message;
        return unavailable(
          503,
          error instanceof ActivationError
            ? message
            : `function ${label} cannot be started: the control plane is unreachable (${message}); try again`,
        );
      }
    }
    const { originOf, endpointOrigin } = this.options;
    return {
      state: 'ready',
      origin: originOf && !endpointOrigin ? originOf(namespace, deployment) : origin,
      timeoutSec: timeoutSecOf(fn),
      // Each commit has an address of its own; the name keeps connections apart all the same.
      revision: deployment,
      release: scaler.requestStartedOn(namespace, deployment, commitIdleSecondsOf(fn)),
    };
  }

  /** A ready endpoint of the commit's Deployment, when the caches know it runs. */
  private async runningOrigin(
    namespace: string,
    deployment: string,
    commit: string,
  ): Promise<string | undefined> {
    const cached = this.options.cache.deployment(namespace, deployment);
    if (!cached || cached.metadata.deletionTimestamp) return undefined;
    const of = commitRevisionOf(cached);
    // Two commits sharing 12 digits would share the name: the one asked for must be the one there.
    if (!of || !commitMatches(of.commit, commit)) return undefined;
    return this.options.scaler.readyEndpoint(namespace, deployment);
  }

  /** The newest finished build of the function at that commit that still has its image. */
  private async keptBuild(fn: SlessFunction, commit: string): Promise<BuildRecord | undefined> {
    const { namespace, name } = fn.metadata;
    const builds = await this.options.keptBuilds({ namespace, name });
    const found = builds
      .filter((b) => b.commit && commitMatches(b.commit, commit) && !b.running && b.image)
      .sort((a, b) => ((a.finishedAt ?? '') < (b.finishedAt ?? '') ? 1 : -1))[0];
    if (!found?.commit || !found.image) return undefined;
    return {
      buildKey: found.buildKey,
      commit: found.commit,
      result: 'Succeeded',
      startedAt: found.finishedAt ?? '',
      ...(found.finishedAt ? { finishedAt: found.finishedAt } : {}),
      image: found.image,
    };
  }

  /**
   * Room made among the function's others, then Service and Deployment applied with force: one
   * replica, whatever was there (a Deployment someone scaled converges back), and the request noted
   * as its last.
   */
  private async create(fn: SlessFunction, build: BuildRecord): Promise<void> {
    const { http, scaler } = this.options;
    const { namespace, name } = fn.metadata;
    await scaler.makeRoomForCommit(namespace, name, commitDeploymentName(name, build.commit));
    await apply(http, SERVICE, commitServiceFor(fn, build.commit), { force: true });
    await apply(
      http,
      DEPLOYMENT,
      commitDeploymentFor(fn, build, {
        imagePullSecrets: this.options.imagePullSecrets ?? [],
        lastRequest: new Date().toISOString(),
      }),
      { force: true },
    );
  }
}
