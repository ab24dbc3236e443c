/**
 * The kube system's asynchronous work: invocations journaled in a RabbitMQ stream when a broker is
 * configured (SLESS_ASYNC_AMQP_URL), and the amqp Triggers' consumers, both run by the leader's term
 * and delivering through this replica's /fn/ once it listens.
 */
import type { Logger } from 'pino';
import type { LeaderRoute } from '../../api/leader-forward.js';
import type { KubeControllerConfig } from '../../config/kube.js';
import type { TriggerScheduler } from '../../core/interfaces.js';
import {
  type KubeAsyncInvocations,
  kubeQueueTriggers,
  wireKubeAsyncInvocations,
} from '../../platform/kube/wire/async.js';
import type { SecretReader } from '../../secrets/references.js';
import type { OutboundPolicy } from '../../source/outbound.js';
import type { KubeCluster } from './cluster.js';

export interface KubeAsyncWork {
  /** Absent when no broker is configured: `/fn/`'s asynchronous requests are then refused. */
  invocations: KubeAsyncInvocations | undefined;
  /** The amqp Triggers of one term, for the control loop's trigger router. */
  queueTriggers: { forTerm(): TriggerScheduler };
  /** Where this replica's /fn/ answers, once known; the workers and consumers deliver there. */
  listening(url: string): void;
}

export async function wireKubeAsync(deps: {
  config: KubeControllerConfig;
  logger: Logger;
  cluster: Pick<KubeCluster, 'store' | 'term' | 'requests'>;
  outbound: OutboundPolicy;
  secrets: { secrets: SecretReader };
  leader: LeaderRoute | undefined;
}): Promise<KubeAsyncWork> {
  const { config, logger } = deps;
  const { term, store, requests } = deps.cluster;
  let origin: string | undefined;
  const invocations = config.asyncInvocations
    ? await wireKubeAsyncInvocations({
        settings: config.asyncInvocations,
        store,
        policy: deps.outbound,
        logger,
        leaderTasks: term,
        ...(deps.leader ? { leader: deps.leader } : {}),
        origin: () => origin,
      })
    : undefined;
  const queueTriggers = kubeQueueTriggers({
    secrets: deps.secrets.secrets,
    logger,
    origin: () => origin,
    onChanged: requests.requester('Trigger'),
    leaderTasks: term,
  });
  return {
    invocations,
    queueTriggers,
    listening: (url) => {
      // A wildcard bind answers on loopback too; the workers call it there.
      origin = url.replace('//0.0.0.0', '//127.0.0.1').replace('//[::]', '//[::1]');
    },
  };
}
