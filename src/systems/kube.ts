/**
 * The production system: the kube adapters around the same Controller and API. Every replica serves
 * the API and /fn/ from watch caches (/fn/ of always-on functions from the gateway thread when one is
 * given, told their routes by the route publisher); the control loop and the other leader-only work
 * run in a LeaderTerm.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { createAuthenticator } from '../api/auth/factory.js';
import type { KubeControllerConfig } from '../config/kube.js';
import type { Leadership, LeaderTasks } from '../core/leadership.js';
import { ReconcileRequests } from '../core/reconcile-requests.js';
import type { KubeAutoscaler } from '../platform/kube/autoscaler.js';
import type { KanikoBuilder } from '../platform/kube/build/kaniko-builder.js';
import type { KubeStore } from '../platform/kube/kube-store.js';
import type { KubeCredentials } from '../platform/kube/kubeconfig.js';
import type { KubeObject } from '../platform/kube/objects.js';
import type { KubeRouteResolver } from '../platform/kube/routes.js';
import type { KubeScaler } from '../platform/kube/scaler.js';
import type { KubeWorkloads } from '../platform/kube/workloads.js';
import type { BuildCollector } from '../reconcile/build-gc.js';
import type { Controller } from '../reconcile/controller.js';
import type { ClientListener } from '../server/early-listener.js';
import {
  controllerContext,
  controllerObserver,
  controlPlaneModules,
  createLogger,
  functionInstanceCounts,
  once,
  outboundPolicy,
  type ProxyThread,
  readyFunctionCounts,
} from './common.js';

export interface KubeSystem {
  app: FastifyInstance;
  store: KubeStore;
  /** The control loop of this replica's current term as leader (the last one, once it stopped leading). */
  readonly controller: Controller;
  /** Whether this replica reconciles now; leader-only work checks it (or registers with `leaderTasks`). */
  leadership: Leadership;
  /** Leader-only work, started when this replica becomes the leader and stopped when it stops being one. */
  leaderTasks: LeaderTasks;
  workloads: KubeWorkloads;
  builder: KanikoBuilder;
  routes: KubeRouteResolver;
  scaler: KubeScaler;
  autoscaler: KubeAutoscaler;
  /** Build garbage collection past the history limit; it runs only while `isLeader` says so. */
  gc: BuildCollector;
  /** Asynchronous invocations, when SLESS_ASYNC_AMQP_URL names a broker. */
  asyncInvocations?: import('../platform/kube/wire/async.js').KubeAsyncInvocations;
  url: string;
  stop(): Promise<void>;
}

/**
 * The production shape: the same Controller and API, with the kube adapters. `kubeConfig` defaults
 * to KUBECONFIG or the in-cluster service account; `originOf` overrides Service addressing (tests).
 */
export async function startKubeSystem(
  config: KubeControllerConfig,
  options: {
    logger?: Logger;
    kubeConfig?: KubeCredentials;
    originOf?: (namespace: string, name: string) => string;
    /** Where a pod at an endpoint address answers (tests: local servers); see KubeRouteOptions. */
    endpointOrigin?: (address: string) => string;
    pollMs?: number;
    /**
     * Whether this replica may run what only one replica should (the idle scale-down, build garbage
     * collection); true when there is no leader election.
     */
    isLeader?: () => boolean;
    /** How often idle functions are looked for (default 5 s). */
    idleSweepMs?: number;
    /** How often the autoscaler samples and decides (default 1 s). */
    autoscaleTickMs?: number;
    /** Where clients' requests come from: the gateway thread's socket, or (absent) a port of the API's own. */
    listener?: ClientListener;
    /**
     * The proxy thread, when `/fn/` is served from one (usually the listener too): it is told each
     * always-on function's route, and counts autoscaled functions' requests on its board.
     */
    gateway?: ProxyThread;
  } = {},
): Promise<KubeSystem> {
  const logger = options.logger ?? createLogger(config);
  const { gateway, listener } = options;
  // The Kubernetes client and the AWS SDK cost most of a second to load; local mode never needs them.
  const [
    { buildApp, BuildHistory, SlessMetrics, withCodeGate, Controller },
    { observedFunctionProxy },
    { guardedGitHttp },
    { S3Client },
    { loadKubeCredentials },
    { KubeCronScheduler },
    { KubeHttp },
    { KubeStore },
    { KubeNamespaces },
    { KubeSourceReaderFactory },
    { PullSecretSync },
    { kubeWebhookSecrets },
    { KubeWorkloads },
    { KubeFunctionLogs },
    { KubeEventRecorder },
    { LeaderTerm },
    { ChangeSignal },
    { wireKubeBuilds },
    { wireKubeSecrets },
    { registerKubeLeaderWork },
    { wireKubeDataPath },
    { replicaReportRoutes },
    { TriggerRouter },
    asyncWiring,
  ] = await Promise.all([
    controlPlaneModules(),
    import('../proxy/function-proxy.js'),
    import('../source/guarded-http.js'),
    import('@aws-sdk/client-s3'),
    import('../platform/kube/kubeconfig.js'),
    import('../platform/kube/cron-scheduler.js'),
    import('../platform/kube/http.js'),
    import('../platform/kube/kube-store.js'),
    import('../platform/kube/namespaces.js'),
    import('../platform/kube/source-readers.js'),
    import('../platform/kube/tenant.js'),
    import('../platform/kube/webhook-secrets.js'),
    import('../platform/kube/workloads.js'),
    import('../platform/kube/function-logs.js'),
    import('../platform/kube/events.js'),
    import('../platform/kube/leader-term.js'),
    import('../platform/kube/change-signal.js'),
    import('../platform/kube/wire/builds.js'),
    import('../platform/kube/wire/secrets.js'),
    import('../platform/kube/wire/leader-work.js'),
    import('../platform/kube/wire/data-path.js'),
    import('../api/routes/replica-reports.js'),
    import('../queue/trigger-router.js'),
    import('../platform/kube/wire/async.js'),
  ]);
  const http = new KubeHttp(options.kubeConfig ?? (await loadKubeCredentials()));
  const s3 = new S3Client({
    endpoint: config.s3.endpoint,
    region: config.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: config.s3.accessKeyId, secretAccessKey: config.s3.secretAccessKey },
  });
  const authenticator = createAuthenticator(config.auth);
  if (config.authDisabled) logger.warn('AUTHENTICATION IS OFF: /v1 is served on loopback without auth');
  const history = new BuildHistory();
  // One policy for every tenant URL: git sources and async callbacks alike.
  const outbound = outboundPolicy(config.tenancy, logger);
  const gitHttp = guardedGitHttp(outbound);
  const pullSecrets = config.pullSecret
    ? new PullSecretSync({ http, controllerNamespace: config.controllerNamespace, ...config.pullSecret })
    : undefined;
  const namespaces = new KubeNamespaces({
    http,
    controllerNamespace: config.controllerNamespace,
    ...(pullSecrets ? { pullSecrets } : {}),
  });
  // Rollouts and builds in progress read their Deployment or Job when a watch sees it move.
  const changes = new ChangeSignal();
  const workloads = new KubeWorkloads({
    http,
    changes,
    imagePullSecrets: config.imagePullSecrets,
    // Read when a reconcile reports instances; the cache is made below and started before any.
    deploymentOf: (ns, name): KubeObject | undefined => routeCache.deployment(ns, name),
    prepareNamespace: (ns) => namespaces.prepare(ns),
    rolloutDeadlineMs: config.rolloutDeadlineMs,
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  // The drift and secret watches ask for reconciles here; the controller of each leader term
  // listens while it runs.
  const requests = new ReconcileRequests();
  // Only the leader reconciles: the control loop, the drift watch and finalizers run while this
  // replica holds the Lease, and stop the moment it does not. Every replica serves /fn/ and the API.
  const term = new LeaderTerm<Controller>({
    election: config.leaderElection,
    logger,
    newControlLoop: (): Controller => newController(),
  });
  const { leadership } = term;
  const currentController = (): Controller => term.current();
  const store = new KubeStore({
    http,
    logger,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    // A deleting GitSource or Function is asked for here; the leader's reconciler of its kind cleans
    // up and releases it.
    requests,
  });
  const events = new KubeEventRecorder({ http, logger, instance: config.leaderElection.identity });
  const dataPath = wireKubeDataPath({
    http,
    config,
    logger,
    store,
    events,
    leadership,
    leaderUrl: () => term.leaderUrl(),
    ...(options.isLeader ? { isLeader: options.isLeader } : {}),
    ...(gateway ? { gateway } : {}),
    ...(options.originOf ? { originOf: options.originOf } : {}),
    ...(options.endpointOrigin ? { endpointOrigin: options.endpointOrigin } : {}),
    ...(options.idleSweepMs ? { idleSweepMs: options.idleSweepMs } : {}),
    ...(options.autoscaleTickMs ? { autoscaleTickMs: options.autoscaleTickMs } : {}),
  });
  const { routeCache, scaler, autoscaler, routes, replicaReports } = dataPath;
  const metrics = new SlessMetrics({
    readyFunctions: () => readyFunctionCounts(store),
    functionInstances: () => functionInstanceCounts(store),
    ...(gateway ? { collectProxyTallies: () => gateway.takeTallies() } : {}),
  });
  const threadQueues = gateway?.queueDepths?.bind(gateway);
  if (threadQueues) metrics.addQueueDepths(threadQueues);
  const builds = wireKubeBuilds({
    http,
    s3,
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
  const { builder, gc } = builds;
  const { secrets, repoSecrets } = wireKubeSecrets({
    http,
    config,
    logger,
    store,
    requests,
    leaderTasks: term,
  });
  registerKubeLeaderWork({ leaderTasks: term, http, config, logger, store, requests, changes, gitHttp });
  // Where this replica's /fn/ answers: the workers and the queue consumers deliver there.
  let origin: string | undefined;
  const leaderRoute = config.leaderElection.enabled
    ? { ...leadership, leaderUrl: () => term.leaderUrl() }
    : undefined;
  // Asynchronous invocations, journaled in a RabbitMQ stream, when a broker is configured.
  const asyncInvocations = config.asyncInvocations
    ? await asyncWiring.wireKubeAsyncInvocations({
        settings: config.asyncInvocations,
        store,
        policy: outbound,
        logger,
        leaderTasks: term,
        ...(leaderRoute ? { leader: leaderRoute } : {}),
        origin: () => origin,
      })
    : undefined;
  // amqp Triggers consume RabbitMQ queues; their URLs come from Secrets of their namespace.
  const queueTriggers = asyncWiring.kubeQueueTriggers({
    secrets,
    logger,
    origin: () => origin,
    onChanged: requests.requester('Trigger'),
    leaderTasks: term,
  });
  const newController = (): Controller =>
    new Controller({
      store,
      builder: withCodeGate(builder, config.codeGate, logger, builds.verdicts),
      platform: workloads,
      readers: new KubeSourceReaderFactory({ http, stateDir: config.stateDir, gitHttp }),
      scheduler: new TriggerRouter(
        new KubeCronScheduler({
          http,
          registryMap: config.kanikoRegistryMap,
          activator: { url: config.activatorUrl, timeoutMs: config.activationTimeoutMs },
        }),
        queueTriggers.forTerm(),
      ),
      jobs: builds.jobs,
      // Builds are Jobs that run on the cluster; the reconciles themselves never wait on them.
      buildConcurrency: 32,
      // A reconcile never waits on a build or a rollout, but each pass makes several API round
      // trips; more of them at once keep a large commit from queueing behind API latency.
      functionConcurrency: 16,
      quotas: config.tenancy.quotas,
      events,
      logger,
      externalUrl: config.externalUrl,
      observer: controllerObserver(metrics, gc),
      secrets,
      repoSecrets,
      functionLeftovers: builds.leftovers,
      requests,
    });
  let ready = false;
  const proxy = observedFunctionProxy({
    routes,
    metrics,
    logger,
    ...(asyncInvocations ? { asyncIntake: (req, res) => void asyncInvocations.intake.handle(req, res) } : {}),
  });
  const app = await buildApp({
    logger,
    proxy,
    authenticator,
    ...(listener ? { listener } : {}),
    ...(leaderRoute ? { leader: leaderRoute } : {}),
    ...(asyncInvocations ? { asyncIntake: asyncInvocations.intake } : {}),
    metrics,
    metricsToken: config.tenancy.metricsToken,
    context: {
      namespaceExists: (ns) => namespaces.namespaceExists(ns),
      ensureNamespace: (ns) => namespaces.ensureNamespace(ns),
      webhookSecret: kubeWebhookSecrets({ http, store, fallback: config.webhookSecrets }),
      ...controllerContext(currentController, store, history, () => ready, leadership),
      platformName: 'kube',
      quotas: config.tenancy.quotas,
      functionLogs: new KubeFunctionLogs({ http }),
      ...(asyncInvocations ? { invocations: asyncInvocations.api } : {}),
    },
  });
  if (replicaReports) await app.register(replicaReportRoutes, { intake: replicaReports });
  dataPath.start(term);
  gc.start();
  gc.request();
  let address: string;
  if (listener) {
    // The listener's port is bound already; requests held there reach the API from now on.
    await app.ready();
    address = listener.url;
  } else address = await app.listen({ host: config.host, port: config.port });
  // WebSocket upgrades to /fn/ go to the function's Service, as requests do.
  const { UpgradeProxy } = await import('../proxy/websocket-upgrade.js');
  const upgrades = new UpgradeProxy({
    routes,
    onUpstreamError: (fn, err) => logger.warn({ function: fn, err }, 'upstream failed'),
  });
  if (listener?.onUpgrade) listener.onUpgrade((req, socket, head) => upgrades.handle(req, socket, head));
  else app.server.on('upgrade', (req, socket, head) => upgrades.handle(req, socket, head));
  // A wildcard bind answers on loopback too; the workers call it there.
  origin = address.replace('//0.0.0.0', '//127.0.0.1').replace('//[::]', '//[::1]');
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
    builder,
    routes,
    scaler,
    autoscaler,
    gc,
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
      s3.destroy();
      http.close();
      await gitHttp.close();
    }),
  };
}
