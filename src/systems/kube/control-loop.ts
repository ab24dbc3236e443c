/**
 * The kube control loop of one leader term: the Controller with the kube adapters (the code gate in
 * front of the kaniko builder, the workloads, the source readers, cron and amqp Triggers, the Job runner),
 * made anew each time this replica becomes the leader.
 */
import type { Logger } from 'pino';
import type { SlessMetrics } from '../../api/metrics.js';
import type { KubeControllerConfig } from '../../config/kube.js';
import type { TriggerScheduler } from '../../core/interfaces.js';
import { withCodeGate } from '../../gate/code-gate.js';
import { KubeCronScheduler } from '../../platform/kube/cron-scheduler.js';
import { KubeSourceReaderFactory } from '../../platform/kube/source-readers.js';
import type { KubeBuilds } from '../../platform/kube/wire/builds.js';
import type { KubeSecretsWiring } from '../../platform/kube/wire/secrets.js';
import type { KubeWorkloads } from '../../platform/kube/workloads.js';
import { TriggerRouter } from '../../queue/trigger-router.js';
import { Controller } from '../../reconcile/controller.js';
import type { GuardedHttpClient } from '../../source/guarded-http.js';
import { controllerObserver } from '../common.js';
import type { KubeCluster } from './cluster.js';

export function kubeControlLoop(deps: {
  config: KubeControllerConfig;
  logger: Logger;
  cluster: KubeCluster;
  workloads: KubeWorkloads;
  builds: KubeBuilds;
  gitHttp: GuardedHttpClient;
  metrics: SlessMetrics;
  secrets: KubeSecretsWiring;
  queueTriggers: { forTerm(): TriggerScheduler };
}): () => Controller {
  const { config, logger, cluster, builds } = deps;
  const { http, store, events, requests } = cluster;
  return () =>
    new Controller({
      store,
      builder: withCodeGate(builds.builder, config.codeGate, logger, builds.verdicts),
      platform: deps.workloads,
      readers: new KubeSourceReaderFactory({ http, stateDir: config.stateDir, gitHttp: deps.gitHttp }),
      // Cron Triggers are CronJobs; amqp Triggers consume their queues in this term.
      scheduler: new TriggerRouter(
        new KubeCronScheduler({
          http,
          registryMap: config.kanikoRegistryMap,
          activator: { url: config.activatorUrl, timeoutMs: config.activationTimeoutMs },
        }),
        deps.queueTriggers.forTerm(),
      ),
      jobs: builds.jobs,
      // Builds are Jobs that run on the cluster; the reconciles themselves never wait on them.
      buildConcurrency: 32,
      // A reconcile never waits on a build or a rollout, but each pass makes several API round
      // trips; more of them at once keep a large commit from queueing behind API latency.
      functionConcurrency: 16,
      quotas: config.tenancy.quotas,
      events,
      logger,
      externalUrl: config.externalUrl,
      observer: controllerObserver(deps.metrics, builds.gc),
      secrets: deps.secrets.secrets,
      repoSecrets: deps.secrets.repoSecrets,
      functionLeftovers: builds.leftovers,
      requests,
    });
}
