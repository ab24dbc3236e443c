/**
 * The embedded system, wired in the order a restart needs: state and the sandbox probe, the platform
 * restoring what served, the /fn/ proxy, then the builder, scheduler, controller and API.
 */
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Authenticator } from '../api/auth/authenticator.js';
import { createAuthenticator } from '../api/auth/factory.js';
import type { SlessMetrics } from '../api/metrics.js';
import { webhookSecretFor } from '../config/auth.js';
import { ConfigError, type LocalConfig } from '../config/config.js';
import { branchOf } from '../core/defaults.js';
import type { ObjectStore, ProcessLauncher } from '../core/interfaces.js';
import { ALWAYS_LEADER } from '../core/leadership.js';
import { ReconcileRequests } from '../core/reconcile-requests.js';
import type { GitSource } from '../core/resources.js';
import { startupMark } from '../core/startup-marks.js';
import { findKeptBuild } from '../platform/local/build/build-archive.js';
import type { LocalBuilder } from '../platform/local/build/local-builder.js';
import type { LocalCronScheduler } from '../platform/local/cron-scheduler.js';
import { FunctionLogBuffer } from '../platform/local/function-logs.js';
import { LocalAutoscaler } from '../platform/local/local-autoscaler.js';
import type { LocalPlatform } from '../platform/local/local-platform.js';
import { LocalState } from '../platform/local/local-state.js';
import { MemoryStore } from '../platform/local/memory-store.js';
import type { FunctionProxy } from '../proxy/function-proxy.js';
import type { BuildCollector } from '../reconcile/build-gc.js';
import type { Controller } from '../reconcile/controller.js';
import { createLauncher, describeIsolation } from '../sandbox/probe.js';
import { LocalSecretStore } from '../secrets/local-store.js';
import type { ClientListener } from '../server/early-listener.js';
import type { GuardedHttpClient } from '../source/guarded-http.js';
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

/**
 * The source given on the command line, with the pin (spec.ref) of the same source as the durable
 * store kept it, so a restart serves the pinned commit, not the branch head. Only for the same
 * repository and branch: a pin means nothing on another one.
 */
async function withStoredPin(store: ObjectStore, source: GitSource): Promise<GitSource> {
  const stored = await store.get('GitSource', source.metadata.namespace, source.metadata.name);
  const ref = stored?.spec.ref;
  if (!ref?.commit || stored?.spec.url !== source.spec.url) return source;
  if (branchOf(stored) !== branchOf(source)) return source;
  return { ...source, spec: { ...source.spec, ref } };
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
    import('../platform/local/local-platform.js'),
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
  // The platform, the scheduler and the queue consumers ask for reconciles here; the controller,
  // built later, listens while it runs.
  const requests = new ReconcileRequests();
  // Where /fn/ is reached from inside (amqp deliveries): known once the API listens.
  const listening: { origin?: string } = {};
  const platform = new LocalPlatform({
    runtimesDir: config.runtimesDir,
    store,
    logger,
    logs,
    launcher,
    ...(config.scaleToZeroAfterSeconds ? { defaultIdleSeconds: config.scaleToZeroAfterSeconds } : {}),
    serving: state.serving,
    onChanged: requests.requester('Function'),
    secrets,
    ...(gateway ? { activity: gateway.activity, mirror: gateway } : {}),
    keptBuild: (ns, name, commit) => findKeptBuild(config.stateDir, ns, name, commit),
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
  const [{ FunctionProxy, observedFunctionProxy }, { SlessMetrics }, { UpgradeProxy }, asyncModules] =
    await Promise.all([
      import('../proxy/function-proxy.js'),
      import('../api/metrics.js'),
      import('../proxy/websocket-upgrade.js'),
      Promise.all([import('../async/wire.js'), import('../platform/local/invocation-store.js')]),
    ]);
  // One policy for every tenant URL: git sources and async callbacks alike.
  const outbound = outboundPolicy(config.tenancy, logger);
  // Asynchronous invocations: queued in the state directory, delivered by workers through /fn/.
  const [{ wireAsyncInvocations }, { LocalInvocationStore }] = asyncModules;
  const asyncInvocations = wireAsyncInvocations({
    store,
    invocations: await LocalInvocationStore.open(config.stateDir, logger),
    policy: outbound,
    logger,
  });
  startupMark('serving path loaded');
  // The /fn/ proxy needs only the platform (and the metrics it counts in), so it serves at once.
  const metrics = new SlessMetrics({
    readyFunctions: () => readyFunctionCounts(store),
    functionInstances: () => functionInstanceCounts(store),
    isKnownFunction: (ns, name) => platform.currentRevision(ns, name) !== undefined,
    ...(gateway ? { collectProxyTallies: () => gateway.takeTallies() } : {}),
  });
  const proxy = observedFunctionProxy({
    routes: platform,
    metrics,
    logger,
    maxStreamMs: config.maxStreamSeconds * 1000,
    asyncIntake: (req, res) => void asyncInvocations.intake.handle(req, res),
  });
  const threadQueues = gateway?.queueDepths?.bind(gateway);
  if (threadQueues) metrics.addQueueDepths(threadQueues);
  options.listener?.serveEarly(FunctionProxy.matches, (req, res) => void proxy.handle(req, res));
  const upgrades = new UpgradeProxy({
    routes: platform,
    onUpstreamError: (fn, err) => logger.warn({ function: fn, err }, 'upstream failed'),
  });
  options.listener?.onUpgrade?.((req, socket, head) => upgrades.handle(req, socket, head));
  startupMark('proxy attached');
  // Loading the control plane (fastify, ajv, isomorphic-git: seconds of CPU on a busy small machine)
  // blocks the event loop, so started alongside the restored revisions it held up their health
  // checks and the requests waiting for them. It loads once they serve; nothing it does can start
  // before then anyway (the controller starts after the restore, so a reconcile never races it).
  await restored.serving;
  startupMark('restored');
  // This start may have used the toolchains the last one found; they are looked up again now.
  void launcher.checkToolchains();
  const { guardedGitHttp } = await import('../source/guarded-http.js');
  const gitHttp = guardedGitHttp(outbound);
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
      requests,
      listening,
      secrets,
      asyncInvocations,
    });
    if (options.listener) {
      await parts.app.ready();
      address = options.listener.url;
    } else address = await parts.app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await asyncInvocations.stop();
    await platform.stopAll();
    await proxy.close();
    await gitHttp.close();
    await launcher.close();
    throw error;
  }
  const { app, controller, builder, scheduler, gc } = parts;
  if (!options.listener) app.server.on('upgrade', (req, socket, head) => upgrades.handle(req, socket, head));
  startupMark('control plane loaded');
  await controller.start();
  listening.origin = address.replace('//0.0.0.0', '//127.0.0.1');
  await asyncInvocations.start(address);
  // Functions with spec.scale run as many instances as their in-flight requests ask for.
  const autoscaler = new LocalAutoscaler({ platform, logger });
  autoscaler.start();
  const commitStatus = await localCommitStatus(config, store, gitHttp, logger);
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
      // Attempts in flight are cut and recorded as interrupted, to be sent again after a start.
      await asyncInvocations.stop();
      autoscaler.stop();
      await gc.stop();
      await controller.stop();
      // Once the controller takes no outcome: runs are cut, their secret files removed.
      await parts.jobs.stop();
      await commitStatus.stop();
      scheduler.stopAll();
      await parts.queueTriggers.stopAll();
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

/** Deploy status on each synced commit, for sources that ask; the token is the secretRef's. */
async function localCommitStatus(
  config: LocalConfig,
  store: ObjectStore,
  http: GuardedHttpClient,
  logger: Logger,
) {
  const [{ commitStatusReporter }, { credentialsFromEnv }] = await Promise.all([
    import('../commitstatus/wire.js'),
    import('../platform/local/source-readers.js'),
  ]);
  const reporter = commitStatusReporter({
    store,
    http,
    logger,
    externalUrl: config.externalUrl,
    credentials: async (source) =>
      source.spec.secretRef
        ? credentialsFromEnv(source.metadata.namespace, source.spec.secretRef.name, config.gitSecrets)
        : undefined,
  });
  reporter.start();
  return reporter;
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
    requests: ReconcileRequests;
    listening: { origin?: string };
    secrets: LocalSecretStore;
    asyncInvocations: import('../async/wire.js').AsyncInvocations;
  },
) {
  const {
    logger,
    state,
    store,
    launcher,
    platform,
    logs,
    authenticator,
    gitHttp,
    metrics,
    requests,
    secrets,
  } = parts;
  const [
    { buildApp, BuildHistory, withCodeGate, Controller },
    { wireLocalBuilds },
    { wireLocalSecrets },
    { LocalCronScheduler },
    { LocalJobRunner },
    { LocalSourceReaderFactory },
    { QueueTriggers },
    { TriggerRouter },
  ] = await Promise.all([
    controlPlaneModules(),
    import('../platform/local/wire/builds.js'),
    import('../platform/local/wire/secrets.js'),
    import('../platform/local/cron-scheduler.js'),
    import('../platform/local/job-runner.js'),
    import('../platform/local/source-readers.js'),
    import('../queue/queue-triggers.js'),
    import('../queue/trigger-router.js'),
  ]);
  const history = new BuildHistory();
  const { builder, gc } = await wireLocalBuilds({
    config,
    logger,
    launcher,
    state,
    store,
    platform,
    onBuildFinished: (record, fn) => {
      metrics.buildFinished(record);
      history.record(record, fn);
    },
  });
  const { repoSecrets } = wireLocalSecrets({ config, secrets, store, requests });
  const scheduler = new LocalCronScheduler({
    routes: platform,
    logger,
    onFired: requests.requester('Trigger'),
  });
  const jobs = new LocalJobRunner({
    commandFor: (fn, build) => platform.runtimeCommand(fn, build),
    logger,
    launcher,
    // The store serving processes read their secret files from: a run mounts the same files.
    secrets,
  });
  // amqp Triggers consume RabbitMQ queues; their URLs come from the namespace's secrets.
  const queueTriggers = new QueueTriggers({
    secrets,
    logger,
    origin: () => parts.listening.origin,
    onChanged: requests.requester('Trigger'),
  });
  const controller = new Controller({
    scheduler: new TriggerRouter(scheduler, queueTriggers),
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
    requests,
    repoSecrets,
  });
  let ready = false;
  const stopping = new AbortController();
  const app = await buildApp({
    logger,
    stopping: stopping.signal,
    authenticator,
    metrics,
    metricsToken: config.tenancy.metricsToken,
    proxy: parts.proxy,
    asyncIntake: parts.asyncInvocations.intake,
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
      invocations: parts.asyncInvocations.api,
    },
  });
  return {
    app,
    controller,
    builder,
    scheduler,
    queueTriggers,
    gc,
    jobs,
    markReady: () => {
      ready = true;
    },
    markUnready: () => {
      ready = false;
      stopping.abort();
    },
  };
}
