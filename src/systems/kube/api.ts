/**
 * The kube API front of every replica: /v1 and /fn/ on fastify (followers forward what only the
 * leader may do, asynchronous requests among it), the followers' concurrency reports the leader sums, the listen, and WebSocket
 * upgrades to /fn/, which go to the function's Service as requests do.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from '../../api/app.js';
import type { Authenticator } from '../../api/auth/authenticator.js';
import type { BuildHistory } from '../../api/build-history.js';
import type { LeaderRoute } from '../../api/leader-forward.js';
import type { SlessMetrics } from '../../api/metrics.js';
import { replicaReportRoutes } from '../../api/routes/replica-reports.js';
import type { KubeControllerConfig } from '../../config/kube.js';
import { KubeFunctionLogs } from '../../platform/kube/function-logs.js';
import { kubeWebhookSecrets } from '../../platform/kube/webhook-secrets.js';
import type { KubeAsyncInvocations } from '../../platform/kube/wire/async.js';
import type { KubeDataPath } from '../../platform/kube/wire/data-path.js';
import type { AdmissionGates } from '../../proxy/admission-gates.js';
import { observedFunctionProxy } from '../../proxy/function-proxy.js';
import { UpgradeProxy } from '../../proxy/websocket-upgrade.js';
import type { ClientListener } from '../../server/early-listener.js';
import { controllerContext } from '../common.js';
import type { KubeCluster } from './cluster.js';

/**
 * The app, with the replica report routes when the data path takes reports, not yet listening; and
 * its proxy's admission gates, which WebSocket upgrades pass too.
 */
export async function buildKubeApi(deps: {
  config: KubeControllerConfig;
  logger: Logger;
  cluster: KubeCluster;
  dataPath: KubeDataPath;
  authenticator: Authenticator;
  metrics: SlessMetrics;
  history: BuildHistory;
  listener: ClientListener | undefined;
  isReady: () => boolean;
  /** The leader's address for what followers hand over; absent without leader election. */
  leader: LeaderRoute | undefined;
  asyncInvocations: KubeAsyncInvocations | undefined;
}): Promise<{ app: FastifyInstance; admissions: AdmissionGates }> {
  const { config, logger, cluster, dataPath, listener, metrics, leader, asyncInvocations } = deps;
  const { http, store, term, namespaces } = cluster;
  const { leadership } = term;
  const proxy = observedFunctionProxy({
    routes: dataPath.routes,
    metrics,
    logger,
    maxStreamMs: config.maxStreamSeconds * 1000,
    ...(asyncInvocations ? { asyncIntake: (req, res) => void asyncInvocations.intake.handle(req, res) } : {}),
  });
  const app = await buildApp({
    logger,
    proxy,
    authenticator: deps.authenticator,
    ...(listener ? { listener } : {}),
    ...(leader ? { leader } : {}),
    ...(asyncInvocations ? { asyncIntake: asyncInvocations.intake } : {}),
    metrics,
    metricsToken: config.tenancy.metricsToken,
    context: {
      namespaceExists: (ns) => namespaces.namespaceExists(ns),
      ensureNamespace: (ns) => namespaces.ensureNamespace(ns),
      webhookSecret: kubeWebhookSecrets({ http, store, fallback: config.webhookSecrets }),
      ...controllerContext(() => term.current(), store, deps.history, deps.isReady, leadership),
      platformName: 'kube',
      quotas: config.tenancy.quotas,
      functionLogs: new KubeFunctionLogs({ http }),
      ...(asyncInvocations ? { invocations: asyncInvocations.api } : {}),
    },
  });
  if (dataPath.replicaReports) await app.register(replicaReportRoutes, { intake: dataPath.replicaReports });
  return { app, admissions: proxy.admissions };
}

/** Listens (or takes the listener's bound port) and sends WebSocket upgrades on; returns the address. */
export async function listenKubeApi(
  app: FastifyInstance,
  deps: {
    config: KubeControllerConfig;
    logger: Logger;
    dataPath: KubeDataPath;
    listener: ClientListener | undefined;
    /** The main thread's request proxy's gates (buildKubeApi's), so sockets count with its requests. */
    admissions: AdmissionGates;
  },
): Promise<string> {
  const { listener, logger, dataPath } = deps;
  let address: string;
  if (listener) {
    // The listener's port is bound already; requests held there reach the API from now on.
    await app.ready();
    address = listener.url;
  } else address = await app.listen({ host: deps.config.host, port: deps.config.port });
  const upgrades = new UpgradeProxy({
    routes: dataPath.routes,
    admissions: deps.admissions,
    onUpstreamError: (fn, err) => logger.warn({ function: fn, err }, 'upstream failed'),
  });
  if (listener?.onUpgrade) listener.onUpgrade((req, socket, head) => upgrades.handle(req, socket, head));
  else app.server.on('upgrade', (req, socket, head) => upgrades.handle(req, socket, head));
  return address;
}
