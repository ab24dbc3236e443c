// `sless controller` as src/cli/controller.ts runs it, from the compiled dist/, with one difference:
// the functions' pods are one local server (SLESS_TEST_FUNCTION_ORIGIN), as the in-process kube tests
// say with originOf, since the played kubelet gives no pod addresses a process here could reach. Run
// without the gateway thread, whose routes cannot be handed that function. A child process, so that a
// test can kill it with SIGKILL.
import { parseArgs } from 'node:util';
import { stopOnSignals } from '../../dist/cli/stop-on-signals.js';
import { loadKubeControllerConfig } from '../../dist/config/kube.js';
import { createLogger, startKubeSystem } from '../../dist/main.js';

const origin = process.env.SLESS_TEST_FUNCTION_ORIGIN;
if (!origin) throw new Error('SLESS_TEST_FUNCTION_ORIGIN is not set');
const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    host: { type: 'string' },
    port: { type: 'string' },
    namespace: { type: 'string' },
    'watch-namespaces': { type: 'string' },
  },
});
const config = { ...loadKubeControllerConfig(values), proxyThread: false };
const logger = createLogger(config);
let system;
stopOnSignals({
  logger,
  message: 'stopping the controller',
  stop: () => (system ? system.stop() : Promise.resolve()),
});
system = await startKubeSystem(config, { logger, originOf: () => origin, pollMs: 100 });
logger.info({ url: system.url }, 'sless controller running');
