/**
 * Shared pieces of the kube suites: the real API server, S3 and registry from test/cluster, the CRDs
 * from crds/, and the parts a kubelet or kaniko would play (there is neither here). Each helper that
 * plays such a part says so in its name: markBuildSucceeded, markBuildFailed, markDeploymentAvailable.
 */
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { type KubeControllerConfig, loadKubeControllerConfig } from '../../src/config/kube.js';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import type { KubeSystem } from '../../src/main.js';
import { KanikoBuilder, type KanikoBuilderOptions } from '../../src/platform/kube/build/kaniko-builder.js';
import { KubeHttp } from '../../src/platform/kube/http.js';
import { apply, getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { JOB, SECRET, slessType } from '../../src/platform/kube/resource-types.js';
import { getTestCluster, type SharedTestCluster } from '../cluster/shared.ts';
import { gitSource } from '../helpers/git.js';
import { pollUntil } from '../helpers/poll-until.js';
import { createNamespace, installCrds } from './install.ts';
import {
  markBuildFailed,
  markBuildSucceeded,
  markDeploymentAvailable,
  markJobComplete,
  markPodStarted,
  playHealthyKubelet,
  playKanikoPushed,
} from './play.ts';

export {
  createNamespace,
  installCrds,
  markBuildFailed,
  markBuildSucceeded,
  markDeploymentAvailable,
  markJobComplete,
  markPodStarted,
  playHealthyKubelet,
  playKanikoPushed,
};

export const logger = pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' });

export function suffix(): string {
  return randomBytes(3).toString('hex');
}

export function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  return pollUntil(what, check, timeoutMs, 100);
}

/** A dockerconfigjson for the test registry: deterministic per (registry, user, password). */
export function dockerConfigJson(registry: string, user: string, password: string): string {
  const auth = Buffer.from(`${user}:${password}`).toString('base64');
  return JSON.stringify({ auths: { [registry]: { auth } } });
}

/** Creates or replaces a kubernetes.io/dockerconfigjson Secret (as an operator would, with kubectl). */
export async function putRegistrySecret(
  http: KubeHttp,
  namespace: string,
  name: string,
  config: string,
): Promise<void> {
  await apply(http, SECRET, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace },
    type: 'kubernetes.io/dockerconfigjson',
    data: { '.dockerconfigjson': Buffer.from(config).toString('base64') },
  });
}

/** Creates or replaces an Opaque Secret from plain strings (as an operator would, with kubectl apply). */
export async function putSecret(
  http: KubeHttp,
  namespace: string,
  name: string,
  stringData: Record<string, string>,
): Promise<void> {
  await http.request('PATCH', `/api/v1/namespaces/${namespace}/secrets/${name}`, {
    query: { fieldManager: 'test-admin', force: true },
    contentType: 'application/apply-patch+yaml',
    body: { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData },
  });
}

/** Puts the pull-only source secret back as kubeEnv made it, after a test changed or deleted it. */
export async function restorePullSecret(env: KubeEnv): Promise<void> {
  const config = Buffer.from(env.registrySecrets.pull, 'base64').toString();
  await putRegistrySecret(env.http, env.controllerNs, 'sless-registry-pull', config);
}

export interface KubeEnv {
  cluster: SharedTestCluster;
  http: KubeHttp;
  s3: S3Client;
  /** Tenant namespace (functions run here). */
  ns: string;
  /** Controller namespace (builds run here). */
  controllerNs: string;
  /** The `.dockerconfigjson` (base64, as stored) of the pull-only and the push secret in controllerNs. */
  registrySecrets: { pull: string; push: string };
  bucket: string;
  config: KubeControllerConfig;
  close(): Promise<void>;
}

export async function kubeEnv(prefix: string, options: { ownCluster?: boolean } = {}): Promise<KubeEnv> {
  const cluster = await getTestCluster(undefined, { own: options.ownCluster ?? false });
  const http = new KubeHttp(cluster.kubeConfig);
  await installCrds(http);
  const id = suffix();
  const ns = `${prefix}-${id}`;
  const controllerNs = `${prefix}-sys-${id}`;
  await createNamespace(http, ns);
  await createNamespace(http, controllerNs);
  // As deploy/README.md asks of an operator: pull-only and push credentials, both in the controller
  // namespace. The pull secret is the source the controller copies into function namespaces.
  const registryHost = cluster.registry.url.replace(/^https?:\/\//, '');
  const pull = dockerConfigJson(registryHost, 'puller', `pull-${id}`);
  const push = dockerConfigJson(registryHost, 'pusher', `push-${id}`);
  await putRegistrySecret(http, controllerNs, 'sless-registry-pull', pull);
  await putRegistrySecret(http, controllerNs, 'sless-registry-push', push);
  const bucket = `${prefix}-${id}`;
  const s3 = new S3Client({
    endpoint: cluster.s3.endpoint,
    region: cluster.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: cluster.s3.accessKeyId, secretAccessKey: cluster.s3.secretAccessKey },
  });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const config = loadKubeControllerConfig(
    { host: '127.0.0.1', port: '0', namespace: controllerNs, 'watch-namespaces': ns },
    {
      SLESS_REGISTRY: cluster.registry.url.replace(/^https?:\/\//, ''),
      SLESS_REGISTRY_INSECURE: 'true',
      SLESS_S3_ENDPOINT: cluster.s3.endpoint,
      SLESS_S3_BUCKET: bucket,
      SLESS_S3_REGION: cluster.s3.region,
      AWS_ACCESS_KEY_ID: cluster.s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: cluster.s3.secretAccessKey,
      SLESS_EXTERNAL_URL: 'http://sless.test',
      // In the test run's directory, which the run removes.
      SLESS_STATE_DIR: join(tmpdir(), `sless-kube-${id}`),
      // The test git server listens on loopback: an admin's explicit allowance, as in production.
      SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
    },
  );
  return {
    cluster,
    http,
    s3,
    ns,
    controllerNs,
    registrySecrets: {
      pull: Buffer.from(pull).toString('base64'),
      push: Buffer.from(push).toString('base64'),
    },
    bucket,
    config,
    close: async () => {
      s3.destroy();
      http.close();
      await cluster.release();
    },
  };
}

export function fakeDigest(seed: string): string {
  return `sha256:${createHash('sha256').update(seed).digest('hex')}`;
}

/**
 * Plays kaniko for one function at one commit: waits for the controller to create the build Job, then
 * marks it succeeded with the digest of `digestSeed`. Returns the Job's name.
 */
export async function completeBuild(
  env: Pick<KubeEnv, 'http' | 'controllerNs'>,
  fn: string,
  commit: string,
  digestSeed: string,
): Promise<string> {
  const job = buildName(fn, commit);
  // The sync, the manifest load and the build's start come first: on a loaded machine (a full run
  // beside this one) that took longer than 20 s.
  await eventually(
    `build Job ${job}`,
    () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job).then((found) => found !== undefined),
    60_000,
  );
  await markBuildSucceeded(env.http, env.controllerNs, job, fakeDigest(digestSeed));
  return job;
}

/**
 * Deploys `fn` from git as a user would: a GitSource `repo` for `url` through the API server, kaniko
 * played for `fn` at `commit`, then waits until the controller reports the Function Ready.
 */
export async function deployFromGit(
  env: Pick<KubeEnv, 'http' | 'ns' | 'controllerNs'>,
  url: string,
  fn: string,
  commit: string,
  timeoutMs?: number,
): Promise<void> {
  await apply(env.http, slessType('GitSource'), gitSource('repo', env.ns, url) as unknown as KubeObject);
  await completeBuild(env, fn, commit, commit);
  await eventually(
    `${fn} Ready`,
    async () => {
      const found = await getObject<KubeObject>(env.http, slessType('Function'), env.ns, fn);
      return (found?.status as FunctionStatus | undefined)?.phase === 'Ready';
    },
    timeoutMs,
  );
}

/** A Function's status as the API server holds it, if the Function exists. */
export async function functionStatus(
  env: Pick<KubeEnv, 'http' | 'ns'>,
  name: string,
): Promise<FunctionStatus | undefined> {
  return (await getObject<KubeObject>(env.http, slessType('Function'), env.ns, name))?.status as
    | FunctionStatus
    | undefined;
}

/**
 * Adds each function the main thread's route resolver is asked for to `into`: a function that the
 * gateway thread serves is never asked for there.
 */
export function recordResolves(system: Pick<KubeSystem, 'routes'>, into: string[]): void {
  const resolve = system.routes.resolve.bind(system.routes);
  system.routes.resolve = (namespace, name) => {
    into.push(name);
    return resolve(namespace, name);
  };
}

/** The replicas a function's Deployment asks for now (its spec, not its status), if it exists. */
export async function deploymentReplicas(
  http: KubeHttp,
  namespace: string,
  name: string,
): Promise<number | undefined> {
  const deployment = await getObject<KubeObject>(
    http,
    { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
    namespace,
    name,
  );
  return (deployment?.spec as { replicas?: number } | undefined)?.replicas;
}

export { afterTicks } from '../helpers/after-ticks.js';

/** The image a function's Deployment runs now, if it exists. */
export async function deploymentImage(
  http: KubeHttp,
  namespace: string,
  name: string,
): Promise<string | undefined> {
  const deployment = await getObject<KubeObject>(
    http,
    { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
    namespace,
    name,
  );
  return (deployment?.spec as { template?: { spec?: { containers?: { image?: string }[] } } } | undefined)
    ?.template?.spec?.containers?.[0]?.image;
}

/** The spec of an object that must exist, typed by the caller. */
export function specOf<T>(object: KubeObject | undefined): T {
  if (!object) throw new Error('object not found');
  return object.spec as T;
}

/** Plays the Job controller for a failed FunctionJob run (same status shape as a failed build). */
export const markJobFailed = markBuildFailed;

/** A KanikoBuilder on the test cluster, configured as the controller configures it. */
export function kanikoBuilder(
  env: KubeEnv,
  http: KubeHttp = env.http,
  extra: Partial<KanikoBuilderOptions> = {},
): KanikoBuilder {
  const s3 = new S3Client({
    endpoint: env.config.s3.endpoint,
    region: env.config.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: env.config.s3.accessKeyId, secretAccessKey: env.config.s3.secretAccessKey },
  });
  return new KanikoBuilder({
    http,
    s3,
    runtimesDir: env.config.runtimesDir,
    logger,
    controllerNamespace: env.controllerNs,
    registry: env.config.registry,
    bucket: env.config.s3.bucket,
    s3Endpoint: env.config.s3.endpoint,
    s3Region: env.config.s3.region,
    s3CredentialsSecret: 'sless-s3',
    pushSecret: 'sless-registry-push',
    pollMs: 100,
    ...extra,
  });
}
