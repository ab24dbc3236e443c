/**
 * `sless controller`: the kube platform in a cluster. Config comes from env (see deploy/) and a few
 * flags, and is validated before anything connects. With the proxy thread (the default), `/fn/` is
 * served from the gateway thread, which owns the port and hands the rest to the main thread.
 */
import { parseArgs } from 'node:util';
import { type KubeControllerConfig, loadKubeControllerConfig } from '../config/kube.js';
import { createLogger, type KubeSystem, startKubeSystem } from '../main.js';
import type { Gateway } from '../server/gateway/gateway.js';
import { stopOnSignals } from './stop-on-signals.js';

export const CONTROLLER_USAGE =
  'usage: sless controller [--host H] [--port P] [--namespace CONTROLLER_NS] [--watch-namespaces a,b] [--registry HOST/PATH] [--proxy-thread on|off] [--max-stream-duration 1h]';

/** The gateway thread as the controller runs it: on its port, cutting streams at the configured maximum. */
export async function startControllerGateway(config: KubeControllerConfig): Promise<Gateway> {
  const { Gateway } = await import('../server/gateway/gateway.js');
  return Gateway.start(config.host, config.port, { maxStreamMs: config.maxStreamSeconds * 1000 });
}

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
      'max-stream-duration': { type: 'string' },
    },
  });
  const config = loadKubeControllerConfig(values);
  const logger = createLogger(config);
  // The thread takes the port; the controller's modules load meanwhile, and requests that arrive
  // before the API is ready wait for it.
  const gateway = config.proxyThread ? await startControllerGateway(config) : undefined;
  let system: KubeSystem | undefined;
  stopOnSignals({
    logger,
    message: 'stopping the controller',
    stop: () => (system ? system.stop() : (gateway?.close() ?? Promise.resolve())),
    gateway,
  });
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
