/**
 * What a kube system takes beyond its configuration (tests' seams, the shared listener and gateway
 * thread) and what it gives its caller.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Leadership, LeaderTasks } from '../../core/leadership.js';
import type { ProxyThread } from '../../core/proxy-thread.js';
import type { KubeAutoscaler } from '../../platform/kube/autoscaler.js';
import type { KanikoBuilder } from '../../platform/kube/build/kaniko-builder.js';
import type { KubeStore } from '../../platform/kube/kube-store.js';
import type { KubeCredentials } from '../../platform/kube/kubeconfig.js';
import type { KubeRouteResolver } from '../../platform/kube/routes.js';
import type { KubeScaler } from '../../platform/kube/scaler.js';
import type { KubeAsyncInvocations } from '../../platform/kube/wire/async.js';
import type { KubeWorkloads } from '../../platform/kube/workloads.js';
import type { BuildCollector } from '../../reconcile/build-gc.js';
import type { Controller } from '../../reconcile/controller.js';
import type { ClientListener } from '../../server/early-listener.js';

export interface KubeSystemOptions {
  logger?: Logger;
  /** Defaults to KUBECONFIG or the in-cluster service account. */
  kubeConfig?: KubeCredentials;
  /** Overrides Service addressing (tests). */
  originOf?: (namespace: string, name: string) => string;
  /** Where a pod at an endpoint address answers (tests: local servers); see KubeRouteOptions. */
  endpointOrigin?: (address: string) => string;
  pollMs?: number;
  /**
   * Whether this replica may run what only one replica should (the idle scale-down, build garbage
   * collection); true when there is no leader election.
   */
  isLeader?: () => boolean;
  /** How often idle functions are looked for (default 5 s). */
  idleSweepMs?: number;
  /** How often the autoscaler samples and decides (default 1 s). */
  autoscaleTickMs?: number;
  /** Where clients' requests come from: the gateway thread's socket, or (absent) a port of the API's own. */
  listener?: ClientListener;
  /**
   * The proxy thread, when `/fn/` is served from one (usually the listener too): it is told each
   * always-on function's route, and counts autoscaled functions' requests on its board.
   */
  gateway?: ProxyThread;
}

export interface KubeSystem {
  app: FastifyInstance;
  store: KubeStore;
  /** The control loop of this replica's current term as leader (the last one, once it stopped leading). */
  readonly controller: Controller;
  /** Whether this replica reconciles now; leader-only work checks it (or registers with `leaderTasks`). */
  leadership: Leadership;
  /** Leader-only work, started when this replica becomes the leader and stopped when it stops being one. */
  leaderTasks: LeaderTasks;
  workloads: KubeWorkloads;
  builder: KanikoBuilder;
  routes: KubeRouteResolver;
  scaler: KubeScaler;
  autoscaler: KubeAutoscaler;
  /** Build garbage collection past the history limit; it runs only while `isLeader` says so. */
  gc: BuildCollector;
  /** Asynchronous invocations, when SLESS_ASYNC_AMQP_URL names a broker. */
  asyncInvocations?: KubeAsyncInvocations;
  url: string;
  stop(): Promise<void>;
}

/** The data path's settings among the options, each only when given. */
export function dataPathSeams(options: KubeSystemOptions) {
  const { isLeader, gateway, originOf, endpointOrigin, idleSweepMs, autoscaleTickMs } = options;
  return {
    ...(isLeader ? { isLeader } : {}),
    ...(gateway ? { gateway } : {}),
    ...(originOf ? { originOf } : {}),
    ...(endpointOrigin ? { endpointOrigin } : {}),
    ...(idleSweepMs ? { idleSweepMs } : {}),
    ...(autoscaleTickMs ? { autoscaleTickMs } : {}),
  };
}
