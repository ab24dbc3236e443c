/**
 * The composition root: config → adapters → controller + server. Nothing else picks concrete
 * implementations.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { Authenticator } from './api/auth/authenticator.js';
import { createAuthenticator } from './api/auth/factory.js';
import type { BuildHistory } from './api/build-history.js';
import type { ClientListener } from './api/early-listener.js';
import { UnavailableError } from './api/errors.js';
import type { SlessMetrics } from './api/metrics.js';
import { webhookSecretFor } from './config/auth.js';
import { ConfigError, type LocalConfig, type TenancySettings } from './config/config.js';
import type { KubeControllerConfig } from './config/kube.js';
import type { ActivityBoard } from './core/activity-board.js';
import { asError } from './core/errors.js';
import type { ObjectStore, ProcessLauncher, RouteMirror } from './core/interfaces.js';
import { ALWAYS_LEADER, type Leadership, LeaderTasks } from './core/leadership.js';
import type { ProxyTally, QueueDepth } from './core/proxy-tallies.js';
import type { BuildRecord, GitSource, SlessFunction } from './core/resources.js';
import { startupMark } from './core/startup-marks.js';
import { SopsDecryptor } from './manifest/sops.js';
import type { KubeAutoscaler } from './platform/kube/autoscaler.js';
import type { KanikoBuilder } from './platform/kube/build/kaniko-builder.js';
import type { KubeStore } from './platform/kube/kube-store.js';
import type { KubeCredentials } from './platform/kube/kubeconfig.js';
import type { LeaderElector } from './platform/kube/leader-election.js';
import type { KubeRouteResolver } from './platform/kube/routes.js';
import type { KubeScaler } from './platform/kube/scaler.js';
import type { KubeWorkloads } from './platform/kube/workloads.js';
import { LocalBuildArchive } from './platform/local/build/build-archive.js';
import type { LocalBuilder } from './platform/local/build/local-builder.js';
import type { LocalCronScheduler } from './platform/local/cron-scheduler.js';
import { FunctionLogBuffer } from './platform/local/function-logs.js';
import type { LocalPlatform } from './platform/local/local-platform.js';
import { LocalState } from './platform/local/local-state.js';
import { MemoryStore } from './platform/local/memory-store.js';
import type { FunctionProxy } from './proxy/function-proxy.js';
import { BuildCollector } from './reconcile/build-gc.js';
import type { Controller, ControllerObserver } from './reconcile/controller.js';
import { createLauncher, describeIsolation } from './sandbox/probe.js';
import { LocalSecretStore } from './secrets/local-store.js';
import { referencesSecret } from './secrets/references.js';
import { keyVersionOf, RepoSecrets } from './secrets/repo-secrets.js';
import type { GuardedHttpClient } from './source/guarded-http.js';
import { OutboundPolicy } from './source/outbound.js';

export interface LocalSystem {
  app: FastifyInstance;
  store: MemoryStore;
  controller: Controller;
  platform: LocalPlatform;
  builder: LocalBuilder;
  scheduler: LocalCronScheduler;
  /** What survives a restart; `platform.pinnedBuildDirs()` is what build GC must keep. */
  state: LocalState;
  /** Build garbage collection past the history limit. */
  gc: BuildCollector;
  url: string;
  stop(): Promise<void>;
}

/** `destination` lets tests read what sless really logs; pretty logs go to stdout through a worker. */
export function createLogger(
  config: Pick<LocalConfig, 'logLevel' | 'prettyLogs'>,
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    level: config.logLevel,
    redact: {
      paths: [
        '*.authorization',
        '*.token',
        '*.password',
        'req.headers.authorization',
        'headers.authorization',
      ],
      censor: '[redacted]',
    },
    ...(config.prettyLogs
      ? { transport: { target: 'pino-pretty', options: { colorize: true, ignore: 'pid,hostname' } } }
      : {}),
  };
  return destination && !config.prettyLogs ? pino(options, destination) : pino(options);
}

/** The outbound policy for tenant URLs; what an admin allowed beyond it is said at start. */
function outboundPolicy(tenancy: TenancySettings, logger: Logger): OutboundPolicy {
  if (tenancy.outboundAllow.length > 0)
    logger.warn(
      { ranges: tenancy.outboundAllow },
      'SLESS_OUTBOUND_ALLOW: sources may reach these private or loopback ranges',
    );
  if (tenancy.outboundDns.length > 0)
    logger.info(
      { servers: tenancy.outboundDns },
      'SLESS_OUTBOUND_DNS: tenant URLs resolve through these name servers',
    );
  return new OutboundPolicy(tenancy.outboundAllow, tenancy.outboundDns);
}

/**
 * The source given on the command line, with the pin (spec.ref) of the same source as the durable
 * store kept it, so a restart serves the pinned commit, not the branch head. Only for the same
 * repository and branch: a pin means nothing on another one.
 */
async function withStoredPin(store: ObjectStore, source: GitSource): Promise<GitSource> {
  const stored = await store.get('GitSource', source.metadata.namespace, source.metadata.name);
  const ref = stored?.spec.ref;
  if (!ref?.commit || stored?.spec.url !== source.spec.url) return source;
  if ((stored.spec.branch ?? 'main') !== (source.spec.branch ?? 'main')) return source;
  return { ...source, spec: { ...source.spec, ref } };
}

/** Queues every Function of the namespace that references the secret. */
async function requeueReferencing(
  store: ObjectStore,
  controller: Pick<Controller, 'enqueueFunction'>,
  namespace: string,
  name: string,
): Promise<void> {
  for (const fn of await store.list('Function', { namespace }))
    if (referencesSecret(fn, name)) controller.enqueueFunction(namespace, fn.metadata.name);
}

/** A key file's version, from its content: a new key is tried on files that failed with the old. */
async function fileVersion(path: string): Promise<string> {
  try {
    return keyVersionOf(await readFile(path, 'utf8'));
  } catch {
    return 'unreadable';
  }
}

/** Shutdown may be asked for more than once (signals, tests); it runs once and every caller waits. */
function once(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => {
    running ??= task();
    return running;
  };
}

/** The ready-functions gauge, per namespace, read at scrape time. */
async function readyFunctionCounts(store: ObjectStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const fn of await store.list('Function'))
    if (fn.status?.phase === 'Ready')
      counts.set(fn.metadata.namespace, (counts.get(fn.metadata.namespace) ?? 0) + 1);
  return counts;
}

function controllerObserver(metrics: SlessMetrics, gc: BuildCollector): ControllerObserver {
  return {
    syncFinished: (source, result, ms) => metrics.syncFinished(source, result, ms),
    buildStarted: (fn) => metrics.buildStarted(fn),
    // A reconcile that succeeded may have made an older build unused: history is trimmed soon after.
    functionReconciled: (namespace, name) => gc.request(undefined, { namespace, name }),
  };
}

function buildRecorder(
  metrics: SlessMetrics,
  history: BuildHistory,
  gc: () => BuildCollector | undefined,
): (record: BuildRecord, fn: SlessFunction) => void {
  return (record, fn) => {
    metrics.buildFinished(record);
    history.record(record, fn);
    // History grew by one: the oldest may now be past the limit, even if the new one never serves.
    gc()?.request(undefined, fn.metadata);
  };
}

/** The parts of the API context that are the same on both platforms. */
function controllerContext(
  controller: () => Controller,
  store: ObjectStore,
  history: BuildHistory,
  isReady: () => boolean,
  leadership: Leadership,
) {
  return {
    store,
    buildHistory: (ns: string, name: string) => history.list(ns, name),
    syncNow: (ns: string, name: string, o?: { force?: boolean }) => controller().syncNow(ns, name, o),
    pinSource: (ns: string, name: string, commit: string | undefined) =>
      controller().pinSource(ns, name, commit),
    retryBuild: (ns: string, name: string) => controller().retryBuild(ns, name),
    isReady,
    leadership,
  };
}

/**
 * The API, the controller and what they use (fastify, ajv, isomorphic-git, prom-client): most of what
 * a start loads. Loaded once restored revisions are starting, so they boot while this compiles.
 */
async function controlPlaneModules() {
  startupMark('control plane loading');
  const [app, history, metrics, gate, controller] = await Promise.all([
    import('./api/app.js'),
    import('./api/build-history.js'),
    import('./api/metrics.js'),
    import('./gate/code-gate.js'),
    import('./reconcile/controller.js'),
  ]);
  return {
    buildApp: app.buildApp,
    BuildHistory: history.BuildHistory,
    SlessMetrics: metrics.SlessMetrics,
    withCodeGate: gate.withCodeGate,
    Controller: controller.Controller,
  };
}

/** What the local system needs of the proxy thread (the Gateway), kept to a type so none loads here. */
interface ProxyThread extends RouteMirror {
  readonly activity: ActivityBoard;
  takeTallies(): Promise<ProxyTally[]>;
  /** Optional: a stand-in thread without admission queues reports none. */
  queueDepths?(): Promise<QueueDepth[]>;
}

/** Starts the embedded platform; `source` registers a GitSource once the controller runs. */
export async function startLocalSystem(
  config: LocalConfig,
  options: {
    logger?: Logger;
    source?: GitSource;
    listener?: ClientListener;
    /** The proxy thread, when `/fn/` is served from one: routes, counts and tallies cross to it. */
    gateway?: ProxyThread;
  } = {},
): Promise<LocalSystem> {
  const logger = options.logger ?? createLogger(config);
  const { gateway } = options;
  // What the last run left comes first: the objects it had applied (with their status), the revisions
  // that served and the builds that failed. A restart then starts from there, not from nothing. The
  // sandbox probe (a few child processes) runs meanwhile.
  // The probe's children run while the serving path (undici, the proxy, prom-client) loads.
  const [state, launcher, { LocalPlatform }] = await Promise.all([
    LocalState.open(config.stateDir, logger).then((state) => {
      startupMark('state loaded');
      return state;
    }),
    createLauncher({
      runDir: join(config.stateDir, 'sandbox'),
      logger,
      ...(config.sandbox === 'off' ? { disabled: 'turned off with --sandbox off (single-user mode)' } : {}),
    }).then((launcher) => {
      startupMark('sandbox probed');
      return launcher;
    }),
    import('./platform/local/local-platform.js'),
  ]);
  const store: MemoryStore = new MemoryStore({
    ...(state.storeSnapshot ? { initial: state.storeSnapshot } : {}),
    persist: (change) => state.saveStore(() => store.snapshotJson(), change),
  });
  const authenticator = createAuthenticator(config.auth);
  if (config.authDisabled)
    logger.warn(
      `AUTHENTICATION IS OFF: anyone who can reach ${config.host}:${config.port} may use /v1 as an admin (local loopback mode only)`,
    );
  else logger.info({ auth: authenticator.description }, '/v1 requires a bearer token');
  const isolation = describeIsolation(launcher.report);
  if (!config.authDisabled && !launcher.report.sandboxed) {
    await launcher.close();
    throw new ConfigError(
      `authentication is on, so tenants' code would run here, and it runs only in a sandbox: ${launcher.report.notEnforced[0]}`,
    );
  }
  if (launcher.report.sandboxed && launcher.report.notEnforced.length === 0) logger.info(isolation);
  else logger.warn(isolation);
  const logs = new FunctionLogBuffer();
  // Sealed at rest under a key kept apart; opened before anything starts a function that needs it.
  const secrets = new LocalSecretStore({ stateDir: config.stateDir, logger }).open();
  // The platform reports scaling to the controller, which needs the platform first; the builder tells
  // the collector of each finished build, and the collector needs the builder first.
  const late: { controller?: Controller; gc?: BuildCollector } = {};
  const platform = new LocalPlatform({
    runtimesDir: config.runtimesDir,
    store,
    logger,
    logs,
    launcher,
    ...(config.scaleToZeroAfterSeconds ? { defaultIdleSeconds: config.scaleToZeroAfterSeconds } : {}),
    serving: state.serving,
    onChanged: (ns, name) => late.controller?.enqueueFunction(ns, name),
    secrets,
    ...(gateway ? { activity: gateway.activity, mirror: gateway } : {}),
  });
  // Serve first: the revisions that served before start from their builds on disk before the API and
  // the controller load (a request that arrives meanwhile waits for its function). Only then
  // does the controller look at git, so an unreachable server or a rejected head cannot delay or undo
  // what served.
  const restored = platform.restore();
  // The restored processes are spawned before the rest loads (undici, prom-client: hundreds of ms of
  // CPU here), so they boot meanwhile.
  await restored.launched;
  startupMark('restored launched');
  const [{ FunctionProxy, observedFunctionProxy }, { SlessMetrics }] = await Promise.all([
    import('./proxy/function-proxy.js'),
    import('./api/metrics.js'),
  ]);
  startupMark('serving path loaded');
  // The /fn/ proxy needs only the platform (and the metrics it counts in), so it serves at once.
  const metrics = new SlessMetrics({
    readyFunctions: () => readyFunctionCounts(store),
    isKnownFunction: (ns, name) => platform.currentRevision(ns, name) !== undefined,
    ...(gateway ? { collectProxyTallies: () => gateway.takeTallies() } : {}),
  });
  const proxy = observedFunctionProxy({ routes: platform, metrics, logger });
  const threadQueues = gateway?.queueDepths?.bind(gateway);
  if (threadQueues) metrics.addQueueDepths(threadQueues);
  options.listener?.serveEarly(FunctionProxy.matches, (req, res) => void proxy.handle(req, res));
  startupMark('proxy attached');
  // Loading the control plane (fastify, ajv, isomorphic-git: seconds of CPU on a busy small machine)
  // blocks the event loop, so started alongside the restored revisions it held up their health
  // checks and the requests waiting for them. It loads once they serve; nothing it does can start
  // before then anyway (the controller starts after the restore, so a reconcile never races it).
  await restored.serving;
  startupMark('restored');
  // This start may have used the toolchains the last one found; they are looked up again now.
  void launcher.checkToolchains();
  const { guardedGitHttp } = await import('./source/guarded-http.js');
  const gitHttp = guardedGitHttp(outboundPolicy(config.tenancy, logger));
  let parts: Awaited<ReturnType<typeof localControlPlane>>;
  let address: string;
  try {
    parts = await localControlPlane(config, {
      logger,
      state,
      store,
      launcher,
      platform,
      logs,
      authenticator,
      gitHttp,
      metrics,
      proxy,
      listener: options.listener,
      late,
      secrets,
    });
    if (options.listener) {
      await parts.app.ready();
      address = options.listener.url;
    } else address = await parts.app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await platform.stopAll();
    await proxy.close();
    await gitHttp.close();
    await launcher.close();
    throw error;
  }
  const { app, controller, builder, scheduler, gc } = parts;
  startupMark('control plane loaded');
  await controller.start();
  if (options.source) await store.apply(await withStoredPin(store, options.source));
  // The first pass removes the history of functions deleted while sless was stopped.
  gc.start();
  gc.request();
  parts.markReady();
  startupMark('ready');
  return {
    app,
    store,
    controller,
    platform,
    builder,
    scheduler,
    state,
    gc,
    url: address,
    stop: once(async () => {
      parts.markUnready();
      await gc.stop();
      await controller.stop();
      scheduler.stopAll();
      await options.listener?.drainClients?.();
      await app.close();
      await options.listener?.close();
      await platform.stopAll();
      await gitHttp.close();
      await launcher.close();
      await state.close();
    }),
  };
}

/** The local builder, scheduler, controller and API around a platform that already serves. */
async function localControlPlane(
  config: LocalConfig,
  parts: {
    logger: Logger;
    state: LocalState;
    store: MemoryStore;
    launcher: ProcessLauncher;
    platform: LocalPlatform;
    logs: FunctionLogBuffer;
    authenticator: Authenticator;
    gitHttp: GuardedHttpClient;
    metrics: SlessMetrics;
    proxy: FunctionProxy;
    listener: ClientListener | undefined;
    /** Filled in here: the platform and the builder report to the controller and the collector. */
    late: { controller?: Controller; gc?: BuildCollector };
    secrets: LocalSecretStore;
  },
) {
  const { logger, state, store, launcher, platform, logs, authenticator, gitHttp, metrics, late, secrets } =
    parts;
  const [
    { buildApp, BuildHistory, withCodeGate, Controller },
    { LocalBuilder },
    { LocalCronScheduler },
    { LocalJobRunner },
    { LocalSourceReaderFactory },
  ] = await Promise.all([
    controlPlaneModules(),
    import('./platform/local/build/local-builder.js'),
    import('./platform/local/cron-scheduler.js'),
    import('./platform/local/job-runner.js'),
    import('./platform/local/source-readers.js'),
  ]);
  const history = new BuildHistory();
  const builder = new LocalBuilder({
    stateDir: config.stateDir,
    ...(config.buildCacheDir ? { cacheDir: config.buildCacheDir } : {}),
    runtimesDir: config.runtimesDir,
    logger,
    launcher,
    onBuildFinished: buildRecorder(metrics, history, () => late.gc),
    failedBuilds: state.failedBuilds,
  });
  const archive = new LocalBuildArchive({
    stateDir: config.stateDir,
    builder,
    servingDirs: () => platform.pinnedBuildDirs(),
    limit: config.buildHistory,
    logger,
  });
  // Nothing builds yet: every staging directory is what a kill left behind.
  await archive.removeLeftovers();
  const gc = new BuildCollector({ store, archive, limit: config.buildHistory, logger });
  late.gc = gc;
  const scheduler = new LocalCronScheduler({
    routes: platform,
    logger,
    onFired: (ns, name) => late.controller?.enqueueTrigger(ns, name),
  });
  const jobs = new LocalJobRunner({
    commandFor: (fn, build) => platform.runtimeCommand(fn, build),
    logger,
    launcher,
  });
  const controller = new Controller({
    scheduler,
    jobs,
    observer: controllerObserver(metrics, gc),
    store,
    builder: withCodeGate(builder, config.codeGate, logger, state.codeVerdicts),
    platform,
    readers: new LocalSourceReaderFactory({
      stateDir: config.stateDir,
      http: gitHttp,
      env: config.gitSecrets,
    }),
    logger,
    externalUrl: config.externalUrl,
    quotas: config.tenancy.quotas,
    secrets,
    repoSecrets: new RepoSecrets({
      decryptor: new SopsDecryptor({
        binary: config.sopsBinary,
        key: config.sopsAgeKeyFile ? { file: config.sopsAgeKeyFile } : undefined,
      }),
      sink: secrets,
      ...(config.sopsAgeKeyFile ? { keyVersion: () => fileVersion(config.sopsAgeKeyFile as string) } : {}),
    }),
  });
  late.controller = controller;
  // A secret that changes (set, rotated, deleted) queues the functions that reference it.
  secrets.subscribe((namespace, name) => void requeueReferencing(store, controller, namespace, name));
  let ready = false;
  const app = await buildApp({
    logger,
    routes: platform,
    authenticator,
    metrics,
    metricsToken: config.tenancy.metricsToken,
    proxy: parts.proxy,
    ...(parts.listener ? { listener: parts.listener } : {}),
    context: {
      namespaceExists: (ns) => store.namespaceExists(ns),
      ensureNamespace: (ns) => store.ensureNamespace(ns),
      webhookSecret: async (ns, source) => webhookSecretFor(config.webhookSecrets, ns, source),
      ...controllerContext(
        () => controller,
        store,
        history,
        () => ready,
        ALWAYS_LEADER,
      ),
      pinSource: (ns, name, commit) => controller.pinSource(ns, name, commit),
      platformName: 'local',
      quotas: config.tenancy.quotas,
      functionLogs: logs,
      secrets,
    },
  });
  return {
    app,
    controller,
    builder,
    scheduler,
    gc,
    markReady: () => {
      ready = true;
    },
    markUnready: () => {
      ready = false;
    },
  };
}

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
  } = {},
): Promise<KubeSystem> {
  const logger = options.logger ?? createLogger(config);
  // The Kubernetes client and the AWS SDK cost most of a second to load; local mode never needs them.
  const [
    { buildApp, BuildHistory, SlessMetrics, withCodeGate, Controller },
    { guardedGitHttp },
    { S3Client },
    { loadKubeCredentials },
    { KanikoBuilder },
    { FunctionCleanup },
    { KubeCronScheduler },
    { KubeHttp },
    { KubeJobRunner },
    { KubeStore },
    { KubeNamespaces },
    { KubeRouteResolver },
    { KubeRouteCache },
    { KubeAutoscaler },
    { KubeSourceReaderFactory },
    { PullSecretSync },
    { kubeWebhookSecrets },
    { KubeWorkloads },
    { KubeFunctionLogs },
    { DriftWatch },
    { KubeEventRecorder },
    { KubeScaler },
    { KubeCodeVerdicts },
    { LeaderElector },
    { KubeBuildArchive },
    { RegistryClient, secretCredentials },
    { BuildWatch },
    { ChangeSignal },
    { KubeSecrets, kubeAgeKey },
    { CodeLayerBuilder },
  ] = await Promise.all([
    controlPlaneModules(),
    import('./source/guarded-http.js'),
    import('@aws-sdk/client-s3'),
    import('./platform/kube/kubeconfig.js'),
    import('./platform/kube/build/kaniko-builder.js'),
    import('./platform/kube/cleanup.js'),
    import('./platform/kube/cron-scheduler.js'),
    import('./platform/kube/http.js'),
    import('./platform/kube/job-runner.js'),
    import('./platform/kube/kube-store.js'),
    import('./platform/kube/namespaces.js'),
    import('./platform/kube/routes.js'),
    import('./platform/kube/route-cache.js'),
    import('./platform/kube/autoscaler.js'),
    import('./platform/kube/source-readers.js'),
    import('./platform/kube/tenant.js'),
    import('./platform/kube/webhook-secrets.js'),
    import('./platform/kube/workloads.js'),
    import('./platform/kube/function-logs.js'),
    import('./platform/kube/drift-watch.js'),
    import('./platform/kube/events.js'),
    import('./platform/kube/scaler.js'),
    import('./platform/kube/code-verdicts.js'),
    import('./platform/kube/leader-election.js'),
    import('./platform/kube/build/build-archive.js'),
    import('./platform/kube/build/registry-client.js'),
    import('./platform/kube/build/build-watch.js'),
    import('./platform/kube/change-signal.js'),
    import('./platform/kube/secrets.js'),
    import('./platform/kube/build/code-layer-build.js'),
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
  const gitHttp = guardedGitHttp(outboundPolicy(config.tenancy, logger));
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
    prepareNamespace: (ns) => namespaces.prepare(ns),
    rolloutDeadlineMs: config.rolloutDeadlineMs,
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  const archive = new KubeBuildArchive({
    http,
    s3,
    bucket: config.s3.bucket,
    controllerNamespace: config.controllerNamespace,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    ...(config.registryDelete
      ? {
          registry: new RegistryClient({
            registry: config.registry,
            insecure: config.insecureRegistry,
            // kaniko's push credentials: the only ones allowed to change the registry.
            credentials: () =>
              secretCredentials(http, config.controllerNamespace, config.pushSecret, config.registry),
          }),
        }
      : {}),
    logger,
  });
  const cleanup = new FunctionCleanup({ s3, bucket: config.s3.bucket, workloads, archive });
  // Builds report to the collector, which needs the builder's store first.
  const late: { gc?: BuildCollector } = {};
  // Only the leader reconciles: the control loop, the drift watch and finalizers run while this
  // replica holds the Lease, and stop the moment it does not. Every replica serves /fn/ and the API.
  const election = config.leaderElection;
  const term: { controller?: Controller; elector?: LeaderElector; started?: Promise<void> } = {};
  const leadership: Leadership = election.enabled
    ? {
        isLeader: () => term.elector?.isLeader() ?? false,
        info: () =>
          term.elector?.info() ?? { identity: election.identity, holder: undefined, isLeader: false },
      }
    : {
        ...ALWAYS_LEADER,
        info: () => ({ identity: election.identity, holder: election.identity, isLeader: true }),
      };
  const currentController = (): Controller => {
    if (!term.controller || !leadership.isLeader())
      throw new UnavailableError('this replica is not the leader; the request goes to the leader');
    return term.controller;
  };
  const store = new KubeStore({
    http,
    logger,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    mayFinalize: () => leadership.isLeader(),
    onFunctionDeleting: (fn) => cleanup.run(fn),
    onSourceDeleting: (source) =>
      currentController().finalizeSource(source.metadata.namespace, source.metadata.name),
  });
  const events = new KubeEventRecorder({ http, logger, instance: election.identity });
  // /fn/ routes from what these informers hold, never from a request to the API server.
  const routeCache = new KubeRouteCache({
    http,
    logger,
    functions: store,
    services: config.functionRoute === 'cluster-ip',
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
  });
  // Every replica holds requests and scales up; only the leader scales idle functions down.
  const scaler = new KubeScaler({
    http,
    store,
    cache: routeCache,
    cachedFunctions: (keep) => store.cached('Function', keep),
    logger,
    events,
    isLeader: options.isLeader ?? (() => leadership.isLeader()),
    activationTimeoutMs: config.activationTimeoutMs,
    maxHeldPerFunction: config.activationQueue,
    ...(options.idleSweepMs ? { sweepMs: options.idleSweepMs } : {}),
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
  });
  // Every replica counts in-flight requests; only the leader applies the decisions.
  const autoscaler = new KubeAutoscaler({
    http,
    cache: routeCache,
    functions: () => store.cached('Function', (fn) => fn.spec.scale !== undefined),
    logger,
    events,
    isLeader: options.isLeader ?? (() => leadership.isLeader()),
    ...(options.autoscaleTickMs ? { tickMs: options.autoscaleTickMs } : {}),
  });
  const routes = new KubeRouteResolver({
    cache: routeCache,
    scaler,
    autoscaler,
    route: config.functionRoute,
    ...(options.originOf ? { originOf: options.originOf } : {}),
  });
  const metrics = new SlessMetrics({
    readyFunctions: () => readyFunctionCounts(store),
  });
  const builder = new KanikoBuilder({
    http,
    s3,
    runtimesDir: config.runtimesDir,
    logger,
    controllerNamespace: config.controllerNamespace,
    registry: config.registry,
    insecureRegistry: config.insecureRegistry,
    bucket: config.s3.bucket,
    s3Endpoint: config.s3.endpoint,
    s3Region: config.s3.region,
    s3CredentialsSecret: config.s3.credentialsSecret,
    pushSecret: config.pushSecret,
    ...(config.kanikoImage ? { kanikoImage: config.kanikoImage } : {}),
    registryMap: config.kanikoRegistryMap,
    ...(config.buildServiceAccount ? { serviceAccountName: config.buildServiceAccount } : {}),
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
    changes,
    onBuildFinished: buildRecorder(metrics, history, () => late.gc),
    ...(config.codeLayer
      ? {
          codeLayer: new CodeLayerBuilder({
            http,
            controllerNamespace: config.controllerNamespace,
            registry: config.registry,
            insecure: config.insecureRegistry,
            // The push credentials, read when a build needs them (they may be rotated).
            credentials: () =>
              secretCredentials(http, config.controllerNamespace, config.pushSecret, config.registry),
            logger,
          }),
        }
      : {}),
  });
  const gc = new BuildCollector({
    store,
    archive,
    limit: config.buildHistory,
    logger,
    events,
    // Every replica may run it, but a pass prunes only while this replica leads.
    shouldRun: options.isLeader ?? (() => leadership.isLeader()),
  });
  late.gc = gc;
  // Functions' Secrets are read to check and hash them, never copied; SOPS files become Secrets.
  const secrets = new KubeSecrets({
    http,
    logger,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
  });
  const ageKey = kubeAgeKey(http, config.controllerNamespace, config.sopsAgeSecret);
  const repoSecrets = new RepoSecrets({
    decryptor: new SopsDecryptor({ binary: config.sopsBinary, key: { text: ageKey.text } }),
    sink: secrets,
    keyVersion: ageKey.version,
  });
  const jobs = new KubeJobRunner({
    http,
    logger,
    imagePullSecrets: config.imagePullSecrets,
    ...(options.pollMs ? { pollMs: options.pollMs } : {}),
  });
  const newController = () =>
    new Controller({
      store,
      builder: withCodeGate(
        builder,
        config.codeGate,
        logger,
        new KubeCodeVerdicts({ http, controllerNamespace: config.controllerNamespace }),
      ),
      platform: workloads,
      readers: new KubeSourceReaderFactory({ http, stateDir: config.stateDir, gitHttp }),
      scheduler: new KubeCronScheduler({
        http,
        registryMap: config.kanikoRegistryMap,
        activator: { url: config.activatorUrl, timeoutMs: config.activationTimeoutMs },
      }),
      jobs,
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
    });
  let ready = false;
  const app = await buildApp({
    logger,
    routes,
    authenticator,
    ...(election.enabled ? { leader: { ...leadership, leaderUrl: () => term.elector?.leaderUrl() } } : {}),
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
    },
  });
  const tasks = new LeaderTasks({
    onError: (task, error) =>
      logger.error({ task, err: asError(error).message }, 'leader-only work failed to start or stop'),
  });
  tasks.register('control loop', () => {
    const controller = newController();
    term.controller = controller;
    term.started = controller
      .start()
      .catch((error: unknown) =>
        logger.error({ err: asError(error).message }, 'the control loop failed to start'),
      );
    return () => controller.stop();
  });
  // A Deployment, Service or CronJob deleted or edited behind the controller's back is put back at once.
  tasks.register('drift watch', () => {
    const drift = new DriftWatch({
      http,
      logger,
      ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
      changes,
      onDrift: (owner, ns, name) => {
        logger.info({ [owner]: `${ns}/${name}` }, 'owned object drifted; reconciling');
        if (owner === 'Trigger') term.controller?.enqueueTrigger(ns, name);
        else term.controller?.enqueueFunction(ns, name);
      },
    });
    drift.start();
    return () => drift.stop();
  });
  tasks.register('build watch', () => {
    const watch = new BuildWatch({ http, logger, controllerNamespace: config.controllerNamespace, changes });
    watch.start();
    return () => watch.stop();
  });
  routeCache.start();
  autoscaler.start();
  // A Secret that changes queues the Functions that reference it: a rotation rolls their pods.
  tasks.register('secret watch', () => {
    const watcher = new KubeSecrets({
      http,
      logger,
      ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    });
    watcher.watch((ns, name) => {
      const referencing = store.cached(
        'Function',
        (f) => f.metadata.namespace === ns && referencesSecret(f, name),
      );
      if (referencing) for (const f of referencing) term.controller?.enqueueFunction(ns, f.metadata.name);
      else if (term.controller) void requeueReferencing(store, term.controller, ns, name);
    });
    return () => watcher.stop();
  });
  // The scaler runs on every replica: each holds requests and scales up; it scales down only while
  // this replica leads.
  scaler.start();
  gc.start();
  gc.request();
  const address = await app.listen({ host: config.host, port: config.port });
  if (election.enabled) {
    term.elector = new LeaderElector({
      http,
      logger,
      namespace: config.controllerNamespace,
      name: election.leaseName,
      identity: election.identity,
      url: election.advertiseUrl ?? address,
      timing: election.timing,
      onStartedLeading: () => void tasks.startAll(),
      onStoppedLeading: () => void tasks.stopAll(),
    });
    await term.elector.start();
  }
  // A replica that leads at once (the only one, or the Lease was free) has its control loop running
  // before this resolves, as a single controller always had.
  if (leadership.isLeader()) {
    await tasks.startAll();
    await term.started;
  }
  ready = true;
  return {
    app,
    store,
    get controller(): Controller {
      if (!term.controller) throw new Error('this replica has not led yet');
      return term.controller;
    },
    leadership,
    leaderTasks: tasks,
    workloads,
    builder,
    routes,
    scaler,
    autoscaler,
    gc,
    url: address,
    stop: once(async () => {
      ready = false;
      // Reconciling stops first; then releasing the Lease lets another replica take over at once
      // instead of after a whole lease duration.
      await tasks.stopAll();
      await term.elector?.stop();
      await gc.stop();
      scaler.stop();
      autoscaler.stop();
      routeCache.stop();
      await builder.stop();
      jobs.stop();
      store.stop();
      await app.close();
      s3.destroy();
      http.close();
      await gitHttp.close();
    }),
  };
}
