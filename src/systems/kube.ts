/**
 * The production system: the kube adapters around the same Controller and API. Every replica serves
 * the API and /fn/ from watch caches (/fn/ of always-on functions from the gateway thread when one is
 * given, told their routes by the route publisher); the control loop and the other leader-only work
 * run in a LeaderTerm. This file lists the parts in the order they need each other and stops them in
 * the reverse order; each part wires itself (kube/*.ts, platform/kube/wire/*.ts).
 */
import type { KubeControllerConfig } from '../config/kube.js';
import type { Controller } from '../reconcile/controller.js';
import { createLogger, once, outboundPolicy, platformMetrics } from './common.js';
import { dataPathSeams, type KubeSystem, type KubeSystemOptions } from './kube/types.js';

export type { KubeSystem, KubeSystemOptions };

export async function startKubeSystem(
  config: KubeControllerConfig,
  options: KubeSystemOptions = {},
): Promise<KubeSystem> {
  const logger = options.logger ?? createLogger(config);
  const { gateway, listener } = options;
  // The Kubernetes client and the AWS SDK cost most of a second to load; local mode never needs them.
  const [cluster, modules] = await Promise.all([
    import('./kube/cluster.js').then(({ openKubeCluster }) =>
      // A term's control loop is made when this replica becomes the leader, from the parts below.
      openKubeCluster(config, {
        logger,
        kubeConfig: options.kubeConfig,
        newControlLoop: () => newControlLoop(),
      }),
    ),
    import('./kube/modules.js').then(({ loadKubeModules }) => loadKubeModules()),
  ]);
  const { http, store, events, changes, requests, term, namespaces } = cluster;
  const { leadership } = term;
  const authenticator = modules.createAuthenticator(config.auth);
  if (config.authDisabled) logger.warn('AUTHENTICATION IS OFF: /v1 is served on loopback without auth');
  const history = new modules.BuildHistory();
  // One policy for every tenant URL: git sources and async callbacks alike.
  const outbound = outboundPolicy(config.tenancy, logger);
  const gitHttp = modules.guardedGitHttp(outbound);
  const dataPath = modules.wireKubeDataPath({
    http,
    config,
    logger,
    store,
    events,
    leadership,
    leaderUrl: () => term.leaderUrl(),
    // Only called for requests, which come once the builds below are wired.
    keptBuilds: (ref) => builds.archive.list(ref),
    ...dataPathSeams(options),
  });
  const workloads = new modules.KubeWorkloads({
    http,
    changes,
    imagePullSecrets: config.imagePullSecrets,
    deploymentOf: (ns, name) => dataPath.routeCache.deployment(ns, name),
    answeringPods: dataPath.routeCache,
    prepareNamespace: (ns) => namespaces.prepare(ns),
    rolloutDeadlineMs: config.rolloutDeadlineMs,
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
    // Canaries split requests in this replica's proxies; the leader judges them by what they counted.
    canaries: { logger, namespaces: config.watchNamespaces, takeCounts: () => dataPath.takeCanaryCounts() },
  });
  const metrics = await platformMetrics(store, gateway);
  const builds = modules.wireKubeBuilds({
    http,
    s3: cluster.s3,
    config,
    logger,
    store,
    events,
    changes,
    shouldCollect: options.isLeader ?? (() => leadership.isLeader()),
    onBuildFinished: (record, fn) => {
      metrics.buildFinished(record);
      history.record(record, fn);
    },
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  const secrets = modules.wireKubeSecrets({ http, config, logger, store, requests, leaderTasks: term });
  modules.registerKubeLeaderWork({
    leaderTasks: term,
    http,
    config,
    logger,
    store,
    requests,
    changes,
    gitHttp,
    canaries: workloads.canaries,
  });
  const leader = config.leaderElection.enabled
    ? { ...leadership, leaderUrl: () => term.leaderUrl() }
    : undefined;
  const asyncWork = await modules.wireKubeAsync({ config, logger, cluster, outbound, secrets, leader });
  const newControlLoop: () => Controller = modules.kubeControlLoop({
    config,
    logger,
    cluster,
    workloads,
    builds,
    gitHttp,
    metrics,
    secrets,
    queueTriggers: asyncWork.queueTriggers,
  });
  let ready = false;
  const api = { config, logger, cluster, dataPath, listener, metrics, authenticator, history, leader };
  const asyncInvocations = asyncWork.invocations;
  const { app, admissions } = await modules.buildKubeApi({ ...api, isReady: () => ready, asyncInvocations });
  dataPath.start(term);
  builds.gc.start();
  builds.gc.request();
  const address = await modules.listenKubeApi(app, { ...api, admissions });
  asyncWork.listening(address);
  await term.start({ http, namespace: config.controllerNamespace, url: address });
  ready = true;
  return {
    app,
    store,
    get controller(): Controller {
      const controller = term.latest();
      if (!controller) throw new Error('this replica has not led yet');
      return controller;
    },
    leadership,
    leaderTasks: term.tasks,
    workloads,
    builder: builds.builder,
    routes: dataPath.routes,
    scaler: dataPath.scaler,
    autoscaler: dataPath.autoscaler,
    gc: builds.gc,
    ...(asyncInvocations ? { asyncInvocations } : {}),
    url: address,
    stop: once(async () => {
      ready = false;
      // Attempts in flight are cut and recorded as interrupted; the next leader sends them again.
      await term.stop();
      await asyncInvocations?.close();
      dataPath.stop();
      await builds.stop();
      store.stop();
      await listener?.drainClients?.();
      await app.close();
      await listener?.close();
      cluster.close();
      await gitHttp.close();
    }),
  };
}
