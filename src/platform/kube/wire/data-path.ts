/**
 * The kube /fn/ data path, wired: the watch caches routing reads (Functions, Deployments, Services,
 * EndpointSlices, pods), the scaler that holds requests for a function at zero, the wait that holds
 * them for a running function with no available replica, the autoscaler with the followers' reports
 * it sums while leading (and the canary counts they carry), the route resolver, and the publisher
 * that tells the gateway thread its routes. Nothing here asks the API server per request.
 */
import type { Logger } from 'pino';
import type { KubeControllerConfig } from '../../../config/kube.js';
import type { CanaryCounts } from '../../../core/canary.js';
import type { EventRecorder, FunctionRef, StoredBuild } from '../../../core/interfaces.js';
import type { Leadership, LeaderTasks } from '../../../core/leadership.js';
import { objectKey } from '../../../core/object-key.js';
import type { ProxyThread } from '../../../core/proxy-thread.js';
import { KubeAutoscaler } from '../autoscaler.js';
import { KubeCommitRevisions } from '../commit-revisions.js';
import type { KubeHttp } from '../http.js';
import type { KubeStore } from '../kube-store.js';
import { ReplicaReports } from '../replica-reports.js';
import { ReplicaWait } from '../replica-wait.js';
import { KubeRouteCache } from '../route-cache.js';
import { KubeRoutePublisher } from '../route-publisher.js';
import { KubeRouteResolver } from '../routes.js';
import { KubeScaler } from '../scaler.js';

export interface KubeDataPathDeps {
  http: KubeHttp;
  config: KubeControllerConfig;
  logger: Logger;
  store: KubeStore;
  events: EventRecorder;
  leadership: Leadership;
  /** The leader's URL as its Lease advertises it: where followers send their reports. */
  leaderUrl: () => string | undefined;
  /** Whether this replica runs the leader's share (scale-in, applying decisions); default: it leads. */
  isLeader?: () => boolean;
  /** The proxy thread, when /fn/ is served from one: told its routes, and counting on its board. */
  gateway?: ProxyThread;
  originOf?: (namespace: string, name: string) => string;
  endpointOrigin?: (address: string) => string;
  idleSweepMs?: number;
  autoscaleTickMs?: number;
  /** The kept builds of a function, for `/fn/{ns}/{name}@{commit}`; without it such URLs answer 404. */
  keptBuilds?: (ref: FunctionRef) => Promise<StoredBuild[]>;
}

export interface KubeDataPath {
  routeCache: KubeRouteCache;
  scaler: KubeScaler;
  autoscaler: KubeAutoscaler;
  routes: KubeRouteResolver;
  /** The leader's intake of followers' reports, with leader election only. */
  replicaReports: ReplicaReports | undefined;
  /**
   * What this replica's proxies (main thread and gateway thread) counted of canaries since last
   * asked, with what followers reported of theirs while it leads.
   */
  takeCanaryCounts(): Promise<CanaryCounts[]>;
  /** Starts the watches and the loops; each term counts only the reports sent to it. */
  start(leaderTasks: Pick<LeaderTasks, 'register'>): void;
  stop(): void;
}

export function wireKubeDataPath(deps: KubeDataPathDeps): KubeDataPath {
  const { http, config, logger, store, events, gateway } = deps;
  const namespaces = config.watchNamespaces ? { namespaces: config.watchNamespaces } : {};
  const isLeader = deps.isLeader ?? (() => deps.leadership.isLeader());
  // /fn/ routes from what these informers hold, never from a request to the API server.
  const routeCache = new KubeRouteCache({
    http,
    logger,
    functions: store,
    services: config.functionRoute === 'cluster-ip',
    // A started pod is asked where its endpoint would be reached.
    ...(deps.endpointOrigin ? { startingPods: { origin: deps.endpointOrigin } } : {}),
    ...namespaces,
  });
  // Every replica holds requests and scales up; only the leader scales idle functions down.
  const scaler = new KubeScaler({
    http,
    store,
    cache: routeCache,
    cachedFunctions: (keep) => store.cached('Function', keep),
    logger,
    events,
    isLeader,
    activationTimeoutMs: config.activationTimeoutMs,
    maxHeldPerFunction: config.activationQueue,
    ...(deps.endpointOrigin ? { endpointOrigin: deps.endpointOrigin } : {}),
    ...(deps.idleSweepMs ? { sweepMs: deps.idleSweepMs } : {}),
    ...namespaces,
  });
  // What this replica's own proxies counted of canaries: `routes` is set below, before any tick.
  let routes: KubeRouteResolver | undefined;
  const takeOwnCanaryCounts = async (): Promise<CanaryCounts[]> => [
    ...(routes?.takeCanaryCounts() ?? []),
    ...((await gateway?.takeCanaryCounts?.()) ?? []),
  ];
  // Followers report their in-flight requests and canary counts to the leader, which adds them to its own.
  const replicaReports = config.leaderElection.enabled
    ? new ReplicaReports({
        http,
        logger,
        namespace: config.controllerNamespace,
        keySecret: config.leaderElection.replicaKeySecret,
        identity: config.leaderElection.identity,
        leader: { ...deps.leadership, leaderUrl: deps.leaderUrl },
        intervalMs: deps.autoscaleTickMs ?? 1000,
        takeCanaryCounts: takeOwnCanaryCounts,
      })
    : undefined;
  // Every replica counts in-flight requests; only the leader applies the decisions.
  const autoscaler = new KubeAutoscaler({
    http,
    cache: routeCache,
    functions: () => store.cached('Function', (fn) => fn.spec.scale !== undefined),
    logger,
    events,
    isLeader,
    ...(deps.autoscaleTickMs ? { tickMs: deps.autoscaleTickMs } : {}),
    // The thread counts the requests it serves where the autoscaler reads them.
    ...(gateway ? { activity: gateway.activity, mirror: gateway } : {}),
    ...(replicaReports
      ? { peers: replicaReports, onSampled: (own, now) => void replicaReports.send(own, now) }
      : {}),
  });
  // A running function with no available replica has its requests held as one at zero would.
  const replicaWait = new ReplicaWait({
    cache: routeCache,
    timeoutMs: config.activationTimeoutMs,
    maxHeldPerFunction: config.activationQueue,
  });
  const keptBuilds = deps.keptBuilds;
  // A kept build by commit: its own Deployment, held for and swept by the scaler.
  const commits = keptBuilds
    ? new KubeCommitRevisions({
        http,
        cache: routeCache,
        scaler,
        keptBuilds,
        imagePullSecrets: config.imagePullSecrets,
        ...(deps.originOf ? { originOf: deps.originOf } : {}),
        ...(deps.endpointOrigin ? { endpointOrigin: deps.endpointOrigin } : {}),
      })
    : undefined;
  routes = new KubeRouteResolver({
    cache: routeCache,
    scaler,
    ...(commits ? { commits } : {}),
    replicaWait,
    autoscaler,
    route: config.functionRoute,
    ...(deps.originOf ? { originOf: deps.originOf } : {}),
    ...(deps.endpointOrigin ? { endpointOrigin: deps.endpointOrigin } : {}),
  });
  // The proxy thread serves always-on functions itself, from routes computed as `routes` computes them.
  const publisher = gateway
    ? new KubeRoutePublisher({
        cache: routeCache,
        routes,
        mirror: gateway,
        autoscaler,
        functionKeys: () => {
          const keys: string[] = [];
          // Only the keys: `keep` sees every cached Function, and refusing each copies none.
          store.cached('Function', (fn) => {
            keys.push(objectKey(fn.metadata.namespace, fn.metadata.name));
            return false;
          });
          return keys;
        },
      })
    : undefined;
  return {
    routeCache,
    scaler,
    autoscaler,
    routes,
    replicaReports,
    // The leader judges canaries by its own threads' counts and those its followers reported.
    takeCanaryCounts: async () => [
      ...(await takeOwnCanaryCounts()),
      ...(replicaReports?.takeReceived() ?? []),
    ],
    start: (leaderTasks) => {
      if (replicaReports)
        leaderTasks.register('replica reports', () => {
          replicaReports.clear();
          return () => replicaReports.clear();
        });
      // Subscribed before the caches list, so no change goes untold.
      publisher?.start();
      routeCache.start();
      autoscaler.start();
      // Every replica holds requests and scales up; it scales down only while this replica leads.
      scaler.start();
    },
    stop: () => {
      replicaWait.stop();
      scaler.stop();
      autoscaler.stop();
      publisher?.stop();
      routeCache.stop();
    },
  };
}
