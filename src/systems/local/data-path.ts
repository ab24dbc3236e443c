/**
 * The local /fn/ data path, wired over a platform that already restores: the metrics it counts in,
 * the HTTP and WebSocket proxies, and the asynchronous invocations queued in the state directory.
 * It needs no control plane, so it serves while that loads.
 */
import type { Logger } from 'pino';
import type { SlessMetrics } from '../../api/metrics.js';
import type { AsyncInvocations } from '../../async/wire.js';
import type { LocalConfig } from '../../config/config.js';
import type { ProxyThread } from '../../core/proxy-thread.js';
import { startupMark } from '../../core/startup-marks.js';
import type { LocalPlatform } from '../../platform/local/local-platform.js';
import type { MemoryStore } from '../../platform/local/memory-store.js';
import type { FunctionProxy } from '../../proxy/function-proxy.js';
import type { UpgradeProxy } from '../../proxy/websocket-upgrade.js';
import type { ClientListener } from '../../server/early-listener.js';
import type { OutboundPolicy } from '../../source/outbound.js';
import { outboundPolicy, platformMetrics } from '../common.js';

export interface LocalDataPath {
  metrics: SlessMetrics;
  proxy: FunctionProxy;
  upgrades: UpgradeProxy;
  asyncInvocations: AsyncInvocations;
  /** One policy for every tenant URL: git sources and async callbacks alike. */
  outbound: OutboundPolicy;
}

export async function wireLocalDataPath(deps: {
  config: LocalConfig;
  logger: Logger;
  store: MemoryStore;
  platform: LocalPlatform;
  gateway: ProxyThread | undefined;
  listener: ClientListener | undefined;
}): Promise<LocalDataPath> {
  const { config, logger, store, platform, gateway, listener } = deps;
  const [{ FunctionProxy, observedFunctionProxy }, metrics, { UpgradeProxy }, asyncModules] =
    await Promise.all([
      import('../../proxy/function-proxy.js'),
      // The /fn/ proxy counts in them; a function is known while a revision of it is current.
      platformMetrics(store, gateway, (ns, name) => platform.currentRevision(ns, name) !== undefined),
      import('../../proxy/websocket-upgrade.js'),
      Promise.all([import('../../async/wire.js'), import('../../platform/local/invocation-store.js')]),
    ]);
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
  // The /fn/ proxy needs only the platform and the metrics, so it serves at once.
  const proxy = observedFunctionProxy({
    routes: platform,
    metrics,
    logger,
    maxStreamMs: config.maxStreamSeconds * 1000,
    asyncIntake: (req, res) => void asyncInvocations.intake.handle(req, res),
  });
  listener?.serveEarly(FunctionProxy.matches, (req, res) => void proxy.handle(req, res));
  const upgrades = new UpgradeProxy({
    routes: platform,
    admissions: proxy.admissions,
    onUpstreamError: (fn, err) => logger.warn({ function: fn, err }, 'upstream failed'),
  });
  listener?.onUpgrade?.((req, socket, head) => upgrades.handle(req, socket, head));
  startupMark('proxy attached');
  return { metrics, proxy, upgrades, asyncInvocations, outbound };
}
