/**
 * What both systems wire the same way: the logger, the outbound policy, the control plane's modules,
 * the metrics, and the observers that feed them, build history and garbage collection.
 */
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { BuildHistory, BuildListener } from '../api/build-history.js';
import type { FunctionInstanceCount, SlessMetrics } from '../api/metrics.js';
import type { LocalConfig, TenancySettings } from '../config/config.js';
import type { ObjectStore } from '../core/interfaces.js';
import type { Leadership } from '../core/leadership.js';
import type { ProxyThread } from '../core/proxy-thread.js';
import { startupMark } from '../core/startup-marks.js';
import type { BuildCollector } from '../reconcile/build-gc.js';
import type { Controller, ControllerObserver } from '../reconcile/controller.js';
import { OutboundPolicy } from '../source/outbound.js';

export type { ProxyThread } from '../core/proxy-thread.js';

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
export function outboundPolicy(tenancy: TenancySettings, logger: Logger): OutboundPolicy {
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

/** Shutdown may be asked for more than once (signals, tests); it runs once and every caller waits. */
export function once(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => {
    running ??= task();
    return running;
  };
}

/** Each function's instances as its status last reported them, for the instances gauge. */
async function functionInstanceCounts(store: ObjectStore): Promise<FunctionInstanceCount[]> {
  const counts: FunctionInstanceCount[] = [];
  for (const fn of await store.list('Function')) {
    const instances = fn.status?.instances;
    if (instances)
      counts.push({ namespace: fn.metadata.namespace, function: fn.metadata.name, ...instances });
  }
  return counts;
}

/** The ready-functions gauge, per namespace, read at scrape time. */
async function readyFunctionCounts(store: ObjectStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const fn of await store.list('Function'))
    if (fn.status?.phase === 'Ready')
      counts.set(fn.metadata.namespace, (counts.get(fn.metadata.namespace) ?? 0) + 1);
  return counts;
}

export function controllerObserver(metrics: SlessMetrics, gc: BuildCollector): ControllerObserver {
  return {
    syncFinished: (source, result, ms) => metrics.syncFinished(source, result, ms),
    buildStarted: (fn) => metrics.buildStarted(fn),
    // A reconcile that succeeded may have made an older build unused: history is trimmed soon after.
    functionReconciled: (namespace, name) => gc.request(undefined, { namespace, name }),
  };
}

/** The parts of the API context that are the same on both platforms. */
export function controllerContext(
  controller: () => Controller,
  store: ObjectStore,
  history: BuildHistory,
  isReady: () => boolean,
  leadership: Leadership,
) {
  return {
    store,
    buildHistory: (ns: string, name: string) => history.list(ns, name),
    onBuildRecorded: (listener: BuildListener) => history.subscribe(listener),
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
export async function controlPlaneModules() {
  startupMark('control plane loading');
  const [app, history, metrics, gate, controller] = await Promise.all([
    import('../api/app.js'),
    import('../api/build-history.js'),
    import('../api/metrics.js'),
    import('../gate/code-gate.js'),
    import('../reconcile/controller.js'),
  ]);
  return {
    buildApp: app.buildApp,
    BuildHistory: history.BuildHistory,
    SlessMetrics: metrics.SlessMetrics,
    withCodeGate: gate.withCodeGate,
    Controller: controller.Controller,
  };
}

/**
 * The metrics both systems count in: ready functions and instances read from status at scrape time,
 * and the proxy thread's tallies and queue depths when `/fn/` is served from one.
 */
export async function platformMetrics(
  store: ObjectStore,
  gateway: ProxyThread | undefined,
  isKnownFunction?: (namespace: string, name: string) => boolean,
): Promise<SlessMetrics> {
  const { SlessMetrics } = await import('../api/metrics.js');
  const metrics = new SlessMetrics({
    readyFunctions: () => readyFunctionCounts(store),
    functionInstances: () => functionInstanceCounts(store),
    ...(isKnownFunction ? { isKnownFunction } : {}),
    ...(gateway ? { collectProxyTallies: () => gateway.takeTallies() } : {}),
  });
  const threadQueues = gateway?.queueDepths?.bind(gateway);
  if (threadQueues) metrics.addQueueDepths(threadQueues);
  return metrics;
}
