/**
 * What only the leader runs besides the control loop, registered with the leader term: the drift
 * watch (an owned Deployment, Service or CronJob edited or deleted by hand is put back), the build
 * watch (a build Job that moves wakes the build waiting on it), the commit status reporter, the
 * sweep of orphan canary Deployments and the pre-pull DaemonSet.
 */
import type { Logger } from 'pino';
import { commitStatusReporter } from '../../../commitstatus/wire.js';
import type { KubeControllerConfig } from '../../../config/kube.js';
import type { ObjectStore, StoreEvent } from '../../../core/interfaces.js';
import type { LeaderTasks } from '../../../core/leadership.js';
import type { ReconcileRequests } from '../../../core/reconcile-requests.js';
import type { SlessFunction } from '../../../core/resources.js';
import type { GuardedHttpClient } from '../../../source/guarded-http.js';
import { BuildWatch } from '../build/build-watch.js';
import type { KubeCanaries } from '../canaries.js';
import type { ChangeSignal } from '../change-signal.js';
import { DriftWatch } from '../drift-watch.js';
import type { KubeHttp } from '../http.js';
import { PrepullKeeper } from '../prepull.js';
import { KubeSourceReaderFactory } from '../source-readers.js';

export function registerKubeLeaderWork(deps: {
  leaderTasks: Pick<LeaderTasks, 'register'>;
  http: KubeHttp;
  config: KubeControllerConfig;
  logger: Logger;
  store: ObjectStore & {
    cached(kind: 'Function', keep: (fn: SlessFunction) => boolean): SlessFunction[] | undefined;
    subscribe(listener: (event: StoreEvent) => void): () => void;
  };
  requests: ReconcileRequests;
  changes: ChangeSignal;
  gitHttp: GuardedHttpClient;
  /** Canary rollouts, when the workloads run them: each term deletes the orphans another left. */
  canaries?: Pick<KubeCanaries, 'beginTerm' | 'endTerm'>;
}): void {
  const { leaderTasks, http, config, logger, requests, changes } = deps;
  leaderTasks.register('drift watch', () => {
    const drift = new DriftWatch({
      http,
      logger,
      ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
      changes,
      onDrift: (owner, ns, name, cause) => {
        if (cause !== 'instances')
          logger.info({ [owner]: `${ns}/${name}`, cause }, 'owned object drifted; reconciling');
        requests.request(owner === 'Trigger' ? 'Trigger' : 'Function', ns, name);
      },
    });
    drift.start();
    return () => drift.stop();
  });
  leaderTasks.register('commit status', () => {
    const readers = new KubeSourceReaderFactory({ http, stateDir: config.stateDir, gitHttp: deps.gitHttp });
    const reporter = commitStatusReporter({
      store: deps.store,
      http: deps.gitHttp,
      logger,
      externalUrl: config.externalUrl,
      credentials: (source) => readers.credentialsOf(source),
    });
    reporter.start();
    return () => reporter.stop();
  });
  const { canaries } = deps;
  // A term's canaries are its own: what another term left is an orphan, deleted before one starts.
  if (canaries)
    leaderTasks.register('canaries', () => {
      canaries.beginTerm();
      return () => canaries.endTerm();
    });
  leaderTasks.register('pre-pull', () => {
    const keeper = new PrepullKeeper({
      http,
      logger,
      enabled: config.prepull,
      settings: {
        controllerNamespace: config.controllerNamespace,
        ...(config.kanikoImage ? { kanikoImage: config.kanikoImage } : {}),
        registryMap: config.kanikoRegistryMap,
      },
      functions: deps.store,
    });
    keeper.start();
    return () => void keeper.stop();
  });
  leaderTasks.register('build watch', () => {
    const watch = new BuildWatch({ http, logger, controllerNamespace: config.controllerNamespace, changes });
    watch.start();
    return () => watch.stop();
  });
}
