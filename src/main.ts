/**
 * The composition root: config → adapters → controller + server. Nothing else picks concrete
 * implementations.
 */
import type { FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import { buildApp } from './api/app.js';
import { createAuthenticator } from './api/auth/factory.js';
import { BuildHistory } from './api/build-history.js';
import { SlessMetrics } from './api/metrics.js';
import { LocalBuilder } from './build/local-builder.js';
import { webhookSecretFor } from './config/auth.js';
import type { LocalConfig } from './config/config.js';
import type { GitSource, SlessFunction } from './core/resources.js';
import { LocalCronScheduler } from './platform/local/cron-scheduler.js';
import { LocalJobRunner } from './platform/local/job-runner.js';
import { LocalPlatform } from './platform/local/local-platform.js';
import { MemoryStore } from './platform/local/memory-store.js';
import { LocalSourceReaderFactory } from './platform/local/source-readers.js';
import { Controller } from './reconcile/controller.js';

export interface LocalSystem {
  app: FastifyInstance;
  store: MemoryStore;
  controller: Controller;
  platform: LocalPlatform;
  builder: LocalBuilder;
  scheduler: LocalCronScheduler;
  url: string;
  stop(): Promise<void>;
}

export function createLogger(config: Pick<LocalConfig, 'logLevel' | 'prettyLogs'>): Logger {
  return pino({
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
  });
}

/** Starts the embedded platform; `source` registers a GitSource once the controller runs. */
export async function startLocalSystem(
  config: LocalConfig,
  options: { logger?: Logger; source?: GitSource } = {},
): Promise<LocalSystem> {
  const logger = options.logger ?? createLogger(config);
  const store = new MemoryStore();
  const authenticator = createAuthenticator(config.auth);
  if (config.authDisabled)
    logger.warn(
      `AUTHENTICATION IS OFF: anyone who can reach ${config.host}:${config.port} may use /v1 as an admin (local loopback mode only)`,
    );
  else logger.info({ auth: authenticator.description }, '/v1 requires a bearer token');
  const history = new BuildHistory();
  const platform = new LocalPlatform({ runtimesDir: config.runtimesDir, store, logger });
  const metrics = new SlessMetrics({
    readyFunctions: async () => {
      const counts = new Map<string, number>();
      for (const fn of (await store.list('Function')) as SlessFunction[])
        if (fn.status?.phase === 'Ready')
          counts.set(fn.metadata.namespace, (counts.get(fn.metadata.namespace) ?? 0) + 1);
      return counts;
    },
    isKnownFunction: (ns, name) => platform.currentRevision(ns, name) !== undefined,
  });
  const builder = new LocalBuilder({
    stateDir: config.stateDir,
    runtimesDir: config.runtimesDir,
    logger,
    onBuildFinished: (record, fn) => {
      metrics.buildFinished(record);
      history.record(record, fn);
    },
  });
  const scheduler = new LocalCronScheduler({ store, routes: platform, logger });
  const jobs = new LocalJobRunner({ commandFor: (fn, build) => platform.runtimeCommand(fn, build), logger });
  const controller = new Controller({
    scheduler,
    jobs,
    observer: {
      syncFinished: (source, result, ms) => metrics.syncFinished(source, result, ms),
      buildStarted: (fn) => metrics.buildStarted(fn),
    },
    store,
    builder,
    platform,
    readers: new LocalSourceReaderFactory({ stateDir: config.stateDir }),
    logger,
    externalUrl: config.externalUrl,
  });
  let ready = false;
  const app = await buildApp({
    logger,
    routes: platform,
    authenticator,
    metrics,
    context: {
      namespaceExists: (ns) => store.namespaceExists(ns),
      ensureNamespace: (ns) => store.ensureNamespace(ns),
      webhookSecret: async (_ns, source) => webhookSecretFor(config.webhookSecrets, source),
      buildHistory: (ns, name) => history.list(ns, name),
      store,
      platformName: 'local',
      syncNow: (ns, name, o) => controller.syncNow(ns, name, o),
      retryBuild: (ns, name) => controller.retryBuild(ns, name),
      isReady: () => ready,
    },
  });
  await controller.start();
  if (options.source) await store.apply(options.source);
  const address = await app.listen({ host: config.host, port: config.port });
  ready = true;
  let stopping: Promise<void> | undefined;
  return {
    app,
    store,
    controller,
    platform,
    builder,
    scheduler,
    url: address,
    stop: () => {
      stopping ??= (async () => {
        ready = false;
        await controller.stop();
        scheduler.stopAll();
        await app.close();
        await platform.stopAll();
      })();
      return stopping;
    },
  };
}
