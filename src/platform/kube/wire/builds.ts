/**
 * The kube build subsystem, wired: the kaniko builder (with the code-layer fast path where it is on),
 * the build archive and its garbage collection, what a deleted Function leaves (its builds), the Job
 * runner of FunctionJobs, and the code gate's verdicts. Its one listener is `onBuildFinished`.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { KubeControllerConfig } from '../../../config/kube.js';
import type { EventRecorder, ObjectStore } from '../../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../../core/resources.js';
import { BuildCollector } from '../../../reconcile/build-gc.js';
import { KubeBuildArchive } from '../build/build-archive.js';
import { CodeLayerBuilder } from '../build/code-layer-build.js';
import { KanikoBuilder } from '../build/kaniko-builder.js';
import { RegistryClient, secretCredentials } from '../build/registry-client.js';
import type { ChangeSignal } from '../change-signal.js';
import { KubeFunctionLeftovers } from '../cleanup.js';
import { KubeCodeVerdicts } from '../code-verdicts.js';
import type { KubeHttp } from '../http.js';
import { KubeJobRunner } from '../job-runner.js';

export interface KubeBuildsDeps {
  http: KubeHttp;
  s3: S3Client;
  config: KubeControllerConfig;
  logger: Logger;
  store: ObjectStore;
  events: EventRecorder;
  /** Jobs seen moving by the build watch: a build in progress reads its Job then. */
  changes: ChangeSignal;
  /** Whether a garbage collection pass may prune now (only while this replica leads). */
  shouldCollect: () => boolean;
  /** Told every finished build (metrics, history), after garbage collection is asked for. */
  onBuildFinished: (record: BuildRecord, fn: SlessFunction) => void;
  pollMs?: number;
}

export interface KubeBuilds {
  builder: KanikoBuilder;
  archive: KubeBuildArchive;
  gc: BuildCollector;
  leftovers: KubeFunctionLeftovers;
  jobs: KubeJobRunner;
  verdicts: KubeCodeVerdicts;
  stop(): Promise<void>;
}

export function wireKubeBuilds(deps: KubeBuildsDeps): KubeBuilds {
  const { http, s3, config, logger } = deps;
  // kaniko's push credentials: the only ones allowed to change the registry, read when needed (they
  // may be rotated).
  const pushCredentials = () =>
    secretCredentials(http, config.controllerNamespace, config.pushSecret, config.registry);
  const archive = new KubeBuildArchive({
    http,
    s3,
    bucket: config.s3.bucket,
    controllerNamespace: config.controllerNamespace,
    ...(config.watchNamespaces ? { namespaces: config.watchNamespaces } : {}),
    ...(config.registryDelete
      ? {
          registry: new RegistryClient({
            registry: config.registry,
            insecure: config.insecureRegistry,
            credentials: pushCredentials,
          }),
        }
      : {}),
    logger,
  });
  const gc = new BuildCollector({
    store: deps.store,
    archive,
    limit: config.buildHistory,
    logger,
    events: deps.events,
    // Every replica may run it, but a pass prunes only while this replica leads.
    shouldRun: deps.shouldCollect,
  });
  const builder = new KanikoBuilder({
    http,
    s3,
    runtimesDir: config.runtimesDir,
    logger,
    controllerNamespace: config.controllerNamespace,
    registry: config.registry,
    insecureRegistry: config.insecureRegistry,
    bucket: config.s3.bucket,
    s3Endpoint: config.s3.endpoint,
    s3Region: config.s3.region,
    s3CredentialsSecret: config.s3.credentialsSecret,
    pushSecret: config.pushSecret,
    ...(config.kanikoImage ? { kanikoImage: config.kanikoImage } : {}),
    registryMap: config.kanikoRegistryMap,
    packageMirrors: config.buildPackageMirrors,
    ...(config.buildServiceAccount ? { serviceAccountName: config.buildServiceAccount } : {}),
    ...(deps.pollMs ? { pollMs: deps.pollMs } : {}),
    changes: deps.changes,
    onBuildFinished: (record, fn) => {
      deps.onBuildFinished(record, fn);
      // History grew by one: the oldest may now be past the limit, even if the new one never serves.
      gc.request(undefined, fn.metadata);
    },
    ...(config.codeLayer
      ? {
          codeLayer: new CodeLayerBuilder({
            http,
            controllerNamespace: config.controllerNamespace,
            registry: config.registry,
            insecure: config.insecureRegistry,
            credentials: pushCredentials,
            logger,
          }),
        }
      : {}),
  });
  const jobs = new KubeJobRunner({
    http,
    logger,
    imagePullSecrets: config.imagePullSecrets,
    ...(deps.pollMs ? { pollMs: deps.pollMs } : {}),
  });
  return {
    builder,
    archive,
    gc,
    leftovers: new KubeFunctionLeftovers({ s3, bucket: config.s3.bucket, archive }),
    jobs,
    verdicts: new KubeCodeVerdicts({ http, controllerNamespace: config.controllerNamespace }),
    stop: async () => {
      await gc.stop();
      await builder.stop();
      jobs.stop();
    },
  };
}
