/**
 * The kube adapters every replica holds, leader or not: the API server's client, S3, tenant
 * namespaces, the store over its watches, the event recorder, the change signal that wakes waits,
 * the reconcile requests, and the leader term the control loop runs in.
 */
import { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { KubeControllerConfig } from '../../config/kube.js';
import { ReconcileRequests } from '../../core/reconcile-requests.js';
import { ChangeSignal } from '../../platform/kube/change-signal.js';
import { KubeEventRecorder } from '../../platform/kube/events.js';
import { KubeHttp } from '../../platform/kube/http.js';
import { KubeStore } from '../../platform/kube/kube-store.js';
import { type KubeCredentials, loadKubeCredentials } from '../../platform/kube/kubeconfig.js';
import { LeaderTerm } from '../../platform/kube/leader-term.js';
import { KubeNamespaces } from '../../platform/kube/namespaces.js';
import { PullSecretSync } from '../../platform/kube/tenant.js';
import type { Controller } from '../../reconcile/controller.js';

export interface KubeCluster {
  http: KubeHttp;
  s3: S3Client;
  namespaces: KubeNamespaces;
  /** Rollouts and builds in progress read their Deployment or Job when a watch sees it move. */
  changes: ChangeSignal;
  /** The drift and secret watches ask for reconciles here; each leader term's controller listens. */
  requests: ReconcileRequests;
  /**
   * Only the leader reconciles: the control loop, the drift watch and finalizers run while this
   * replica holds the Lease, and stop the moment it does not.
   */
  term: LeaderTerm<Controller>;
  store: KubeStore;
  events: KubeEventRecorder;
  /** Closes the clients, once nothing uses them; the store's watches stop apart, earlier. */
  close(): void;
}

export async function openKubeCluster(
  config: KubeControllerConfig,
  options: { logger: Logger; kubeConfig: KubeCredentials | undefined; newControlLoop: () => Controller },
): Promise<KubeCluster> {
  const { logger } = options;
  const http = new KubeHttp(options.kubeConfig ?? (await loadKubeCredentials()));
  const s3 = new S3Client({
    endpoint: config.s3.endpoint,
    region: config.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: config.s3.accessKeyId, secretAccessKey: config.s3.secretAccessKey },
  });
  const pullSecrets = config.pullSecret
    ? new PullSecretSync({ http, controllerNamespace: config.controllerNamespace, ...config.pullSecret })
    : undefined;
  const namespaces = new KubeNamespaces({
    http,
    controllerNamespace: config.controllerNamespace,
    ...(pullSecrets ? { pullSecrets } : {}),
  });
  const requests = new ReconcileRequests();
  const term = new LeaderTerm<Controller>({
    election: config.leaderElection,
    logger,
    newControlLoop: options.newControlLoop,
  });
  const store = new KubeStore({
    http,
    logger,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    // A deleting GitSource or Function is asked for here; the leader's reconciler of its kind cleans
    // up and releases it.
    requests,
  });
  const events = new KubeEventRecorder({ http, logger, instance: config.leaderElection.identity });
  return {
    http,
    s3,
    namespaces,
    changes: new ChangeSignal(),
    requests,
    term,
    store,
    events,
    close: () => {
      s3.destroy();
      http.close();
    },
  };
}
