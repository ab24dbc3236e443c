/**
 * The local control plane around a platform that already serves: the builder and its garbage
 * collector, the cron and queue triggers, the job runner, the controller, the commit status
 * reporter and the API. Loaded once the restored revisions serve, since loading it costs seconds of
 * CPU that would hold up their health checks.
 */
import type { Logger } from 'pino';
import { webhookSecretFor } from '../../config/auth.js';
import type { LocalConfig } from '../../config/config.js';
import type { ObjectStore } from '../../core/interfaces.js';
import { ALWAYS_LEADER } from '../../core/leadership.js';
import type { ClientListener } from '../../server/early-listener.js';
import type { GuardedHttpClient } from '../../source/guarded-http.js';
import { controllerContext, controllerObserver, controlPlaneModules } from '../common.js';
import type { LocalDataPath } from './data-path.js';
import type { LocalServing } from './serving.js';

/** Deploy status on each synced commit, for sources that ask; the token is the secretRef's. */
export async function localCommitStatus(
  config: LocalConfig,
  store: ObjectStore,
  http: GuardedHttpClient,
  logger: Logger,
) {
  const [{ commitStatusReporter }, { credentialsFromEnv }] = await Promise.all([
    import('../../commitstatus/wire.js'),
    import('../../platform/local/source-readers.js'),
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
export async function localControlPlane(
  config: LocalConfig,
  parts: {
    logger: Logger;
    serving: LocalServing;
    dataPath: LocalDataPath;
    gitHttp: GuardedHttpClient;
    listener: ClientListener | undefined;
    /** Where /fn/ is reached from inside (amqp deliveries): known once the API listens. */
    listening: { origin?: string };
  },
) {
  const { logger, gitHttp } = parts;
  const { state, store, launcher, platform, logs, authenticator, requests, secrets } = parts.serving;
  const { metrics, proxy, asyncInvocations } = parts.dataPath;
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
    import('../../platform/local/wire/builds.js'),
    import('../../platform/local/wire/secrets.js'),
    import('../../platform/local/cron-scheduler.js'),
    import('../../platform/local/job-runner.js'),
    import('../../platform/local/source-readers.js'),
    import('../../queue/queue-triggers.js'),
    import('../../queue/trigger-router.js'),
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
    proxy,
    asyncIntake: asyncInvocations.intake,
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
      platformName: 'local',
      quotas: config.tenancy.quotas,
      functionLogs: logs,
      secrets,
      invocations: asyncInvocations.api,
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
