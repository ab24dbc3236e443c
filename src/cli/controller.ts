/**
 * `sless controller`: the kube platform in a cluster. Config comes from env (see deploy/) and a few
 * flags, and is validated before anything connects. With the proxy thread (the default), `/fn/` is
 * served from the gateway thread, which owns the port and hands the rest to the main thread.
 */
import { parseArgs } from 'node:util';
import { loadKubeControllerConfig } from '../config/kube.js';
import { createLogger, type KubeSystem, startKubeSystem } from '../main.js';

export const CONTROLLER_USAGE =
  'usage: sless controller [--host H] [--port P] [--namespace CONTROLLER_NS] [--watch-namespaces a,b] [--registry HOST/PATH] [--proxy-thread on|off]';

export async function runController(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      namespace: { type: 'string' },
      'watch-namespaces': { type: 'string' },
      registry: { type: 'string' },
      'proxy-thread': { type: 'string' },
    },
  });
  const config = loadKubeControllerConfig(values);
  const logger = createLogger(config);
  // The thread takes the port; the controller's modules load meanwhile, and requests that arrive
  // before the API is ready wait for it.
  const gateway = config.proxyThread
    ? await (await import('../server/gateway/gateway.js')).Gateway.start(config.host, config.port)
    : undefined;
  let system: KubeSystem | undefined;
  let stopping = false;
  const shutdown = (signal: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping the controller');
    void (system ? system.stop() : (gateway?.close() ?? Promise.resolve()))
      .catch(() => undefined)
      .then(() => process.exit(exitCode));
  };
  gateway?.report({
    upstreamError: (fn, message) => logger.warn({ function: fn, err: message }, 'upstream failed'),
    // Without the thread nothing answers on the port: exit, so that the pod is restarted.
    failed: (error) => {
      logger.error({ err: error.message }, 'the proxy thread stopped');
      shutdown('proxy thread failed', 1);
    },
  });
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  system = await startKubeSystem(config, { logger, ...(gateway ? { listener: gateway, gateway } : {}) });
  logger.info(
    {
      url: system.url,
      controllerNamespace: config.controllerNamespace,
      watching: config.watchNamespaces ?? 'all namespaces',
      registry: config.registry,
      proxyThread: config.proxyThread,
    },
    'sless controller running',
  );
}
