/**
 * `sless controller`: the kube platform in a cluster. Config comes from env (see deploy/) and a few
 * flags, and is validated before anything connects.
 */
import { parseArgs } from 'node:util';
import { loadKubeControllerConfig } from '../config/kube.js';
import { createLogger, startKubeSystem } from '../main.js';

export const CONTROLLER_USAGE =
  'usage: sless controller [--host H] [--port P] [--namespace CONTROLLER_NS] [--watch-namespaces a,b] [--registry HOST/PATH]';

export async function runController(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      namespace: { type: 'string' },
      'watch-namespaces': { type: 'string' },
      registry: { type: 'string' },
    },
  });
  const config = loadKubeControllerConfig(values);
  const logger = createLogger(config);
  const system = await startKubeSystem(config, { logger });
  logger.info(
    {
      url: system.url,
      controllerNamespace: config.controllerNamespace,
      watching: config.watchNamespaces ?? 'all namespaces',
      registry: config.registry,
    },
    'sless controller running',
  );
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'stopping the controller');
    void system.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}
