/**
 * How a running sless stops, for both commands that serve (`sless dev`, `sless controller`): once, on
 * SIGINT or SIGTERM, or with exit code 1 when the gateway thread fails, since without it nothing answers
 * on the port and a supervisor (or the kubelet) must start the process again.
 */
import type { Logger } from 'pino';
import type { GatewayReports } from '../server/gateway/gateway.js';

export interface StopOnSignalsOptions {
  logger: Logger;
  /** The log line when stopping starts. */
  message: string;
  /** Stops whatever has started by then. */
  stop(): Promise<void>;
  /** The gateway thread, when `/fn/` is served from one. */
  gateway?: { report(reports: GatewayReports): void } | undefined;
}

/** Installs the handlers; `stopping()` says whether a stop has begun (a start then returns early). */
export function stopOnSignals(options: StopOnSignalsOptions): { stopping(): boolean } {
  const { logger } = options;
  let stopping = false;
  const shutdown = (signal: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, options.message);
    void options
      .stop()
      .catch(() => undefined)
      .then(() => process.exit(exitCode));
  };
  options.gateway?.report({
    upstreamError: (fn, message) => logger.warn({ function: fn, err: message }, 'upstream failed'),
    failed: (error) => {
      logger.error({ err: error.message }, 'the proxy thread stopped');
      shutdown('proxy thread failed', 1);
    },
  });
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  return { stopping: () => stopping };
}
