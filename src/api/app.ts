import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { RouteResolver } from '../core/interfaces.js';
import { proxyPlugin } from '../proxy/proxy.js';
import type { ApiContext } from './context.js';
import { installErrorHandling } from './errors.js';
import { statusRoutes } from './routes/status.js';

export interface AppOptions {
  context: ApiContext;
  routes: RouteResolver;
  logger: Logger;
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    disableRequestLogging: true,
    bodyLimit: 1024 * 1024,
    keepAliveTimeout: 65_000,
    // `/fn/...` paths carry the function's own path and may be long.
    routerOptions: { maxParamLength: 2048 },
  });
  installErrorHandling(app);

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (!options.context.isReady()) return reply.code(503).send({ error: 'not ready' });
    return { status: 'ready' };
  });

  await app.register(statusRoutes, { context: options.context });
  await app.register(proxyPlugin, { routes: options.routes });
  return app;
}
