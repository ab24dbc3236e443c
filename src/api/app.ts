/**
 * The HTTP server sless answers on, assembled in one place: which route groups exist and which
 * guard each sits behind (bearer auth and tenant checks for `/v1`, a source's shared secret for
 * webhooks, none for probes). In front of fastify, /fn/ invocations go straight to the function
 * proxy, and among replicas the requests only the leader can serve are handed to it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { NotFoundError } from '../core/errors.js';
import { FunctionProxy } from '../proxy/function-proxy.js';
import type { ClientListener } from '../server/early-listener.js';
import { proxyPlugin, rawFunctionRoutes } from '../server/fn-routes.js';
import { HttpFront } from '../server/http-front.js';
import type { Authenticator } from './auth/authenticator.js';
import { guardLoopback } from './auth/loopback-guard.js';
import { requireAuth } from './auth/plugin.js';
import type { ApiContext } from './context.js';
import { installErrorHandling } from './errors.js';
import { forwardToLeader, type LeaderRoute, mustForward } from './leader-forward.js';
import { SlessMetrics } from './metrics.js';
import { RouteCollector } from './openapi.js';
import { eventRoutes } from './routes/events.js';
import { functionRoutes } from './routes/functions.js';
import { healthRoutes } from './routes/health.js';
import { invocationRoutes } from './routes/invocations.js';
import { logRoutes } from './routes/logs.js';
import { namespaceRoutes } from './routes/namespaces.js';
import { pinRoutes } from './routes/pin.js';
import { resourceReadRoutes } from './routes/resources.js';
import { secretRoutes } from './routes/secrets.js';
import { sessionRoutes } from './routes/session.js';
import { sourceRoutes } from './routes/sources.js';
import { triggerJobRoutes } from './routes/triggers-jobs.js';
import { validateRoutes } from './routes/validate.js';
import { uiRoutes } from './ui/assets.js';
import { createValidatorCompiler } from './validation.js';
import { webhookPlugin } from './webhooks/plugin.js';

export interface AppOptions {
  context: ApiContext;
  logger: Logger;
  /** Who may use `/v1`. main.ts picks JWT or, on loopback only, none. */
  authenticator: Authenticator;
  /** This app's metrics; a fresh registry when omitted. */
  metrics?: SlessMetrics;
  /** Request body cap for API and webhook bodies (413 above it). */
  bodyLimit?: number;
  version?: string;
  /** A static bearer token Prometheus may scrape /metrics with when auth is on. */
  metricsToken?: string | undefined;
  /** Replicas with leader election: what needs the control loop goes to the leader. */
  leader?: LeaderRoute;
  /** The one /fn/ proxy of this process, built by the system (it may serve before the app is built). */
  proxy: FunctionProxy;
  /** A port bound before the app was built: it serves the app once the app is ready (no `listen`). */
  listener?: ClientListener;
  /** Where the dashboard's built files are (dist/ui when omitted). */
  uiDir?: string;
  /**
   * Aborted when sless begins to stop, before it drains its clients: endless answers (event streams)
   * end then, instead of holding the drain for its whole grace period.
   */
  stopping?: AbortSignal;
  /** `/fn-async/` requests, queued rather than proxied; absent where a platform has no queue. */
  asyncIntake?: { handle(req: IncomingMessage, res: ServerResponse): Promise<void> };
}

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const bodyLimit = options.bodyLimit ?? 1024 * 1024;
  const metrics = options.metrics ?? new SlessMetrics();
  const { proxy, listener, leader } = options;
  const front = new HttpFront({
    proxy,
    isInvocation: (url) => FunctionProxy.matches(url),
    ...(leader
      ? {
          forwardedToLeader: (req, res) => {
            if (!mustForward(leader, req)) return false;
            forwardToLeader(leader, req, res);
            return true;
          },
        }
      : {}),
    ...(listener ? { listener } : {}),
  });
  const app = Fastify({
    serverFactory: (handler) => front.serverFor(handler),
    loggerInstance: options.logger as FastifyBaseLogger,
    // Per-request access logs cost throughput on the /fn/ path; metrics count requests instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    keepAliveTimeout: 65_000,
    // `/fn/...` paths carry the function's own path and may be long.
    routerOptions: { maxParamLength: 2048 },
  });
  installErrorHandling(app);
  if (options.authenticator.trustsLoopback) guardLoopback(app, (url) => url.startsWith('/v1/webhooks/'));
  app.setValidatorCompiler(createValidatorCompiler());
  const collector = new RouteCollector();
  collector.attach(app);
  const { context } = options;
  app.addHook('onClose', () => proxy.close());
  if (listener) app.addHook('onReady', async () => front.apiReady());

  await app.register(healthRoutes, {
    context,
    metrics,
    collector,
    authenticator: options.authenticator,
    metricsToken: options.metricsToken,
    version: options.version ?? '0.1.0',
  });

  // `/v1` except webhooks: bearer auth and tenant checks for everything registered inside.
  await app.register(async (v1) => {
    requireAuth(v1, options.authenticator);
    // API bodies are JSON. A text/plain body is what a cross-site form can send without a CORS
    // preflight, so it gets the 415 any other unsupported type gets.
    v1.removeContentTypeParser('text/plain');
    await v1.register(namespaceRoutes, { context });
    // Namespace-scoped objects: an unknown namespace is a 404 (checked after auth and validation,
    // so a stranger learns nothing and a malformed name is a 400).
    await v1.register(async (scoped) => {
      scoped.addHook('preHandler', async (request) => {
        const { ns } = request.params as { ns: string };
        if (!(await context.namespaceExists(ns))) throw new NotFoundError(`namespace ${ns} not found`);
      });
      await scoped.register(resourceReadRoutes, { context });
      await scoped.register(sourceRoutes, { context });
      await scoped.register(pinRoutes, { context });
      await scoped.register(functionRoutes, { context });
      await scoped.register(logRoutes, { context });
      await scoped.register(triggerJobRoutes, { context });
      await scoped.register(secretRoutes, { context });
      await scoped.register(invocationRoutes, { context });
      await scoped.register(validateRoutes);
      await scoped.register(eventRoutes, {
        context,
        ...(options.stopping ? { stopping: options.stopping } : {}),
      });
    });
    await v1.register(sessionRoutes, { context });
  });
  // The dashboard's files carry no data and sit outside /v1's auth; in no-auth mode the loopback
  // guard covers them as it covers every route.
  await app.register(uiRoutes, options.uiDir ? { dir: options.uiDir } : {});

  await app.register(webhookPlugin, { context, bodyLimit });
  await app.register(proxyPlugin, { proxy });
  const { asyncIntake } = options;
  // The body is stored as it came, whatever its type.
  if (asyncIntake)
    await app.register(rawFunctionRoutes, {
      base: '/fn-async',
      methods: ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'],
      handle: (req, res) => asyncIntake.handle(req, res),
    });
  return app;
}
