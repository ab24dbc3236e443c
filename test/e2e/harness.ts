/**
 * The e2e suite's environment: a real node (test/cluster/node.ts), a git server, and the sless
 * controller as it runs outside the cluster (in this process, like `sless controller` on a machine
 * with a kubeconfig), building with kaniko from base images in the node's registry.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { type KubeControllerConfig, loadKubeControllerConfig } from '../../src/config/kube.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { KubeHttp } from '../../src/platform/kube/http.js';
import { apply } from '../../src/platform/kube/objects.js';
import { SECRET } from '../../src/platform/kube/resource-types.js';
import { startTestNode, type TestNode } from '../cluster/node.ts';
import { git, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  createNamespace,
  dockerConfigJson,
  eventually,
  installCrds,
  putRegistrySecret,
} from '../kube/harness.js';

export const logger = pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' });

export interface E2eEnv {
  node: TestNode;
  http: KubeHttp;
  system: KubeSystem;
  /** The controller's configuration, for a test that starts another controller (a restart). */
  config: KubeControllerConfig;
  repo: TestRepo;
  /** Tenant namespace (functions) and controller namespace (builds). */
  ns: string;
  controllerNs: string;
  /** The controller namespace's secrets as the operator created them (what tenant code must never see). */
  secrets: { s3AccessKeyId: string; s3SecretAccessKey: string; pushPassword: string; pushAuth: string };
  /** Commits (null deletes), pushes, and syncs the GitSource at once; returns the commit. */
  commit(files: Record<string, string | null>): Promise<string>;
  close(): Promise<void>;
}

export interface E2eOptions {
  /** Cluster DNS and the extra images on the node (see NodeStartOptions). */
  extras?: boolean;
  /** Controller settings beyond the harness's own (e.g. SLESS_ROLLOUT_DEADLINE). */
  env?: Record<string, string>;
  /**
   * More settings, from servers started once the node is up (a package mirror on its bridge
   * address); their `close` runs with the environment's.
   */
  withNode?: (node: TestNode) => Promise<{ env: Record<string, string>; close(): Promise<void> }>;
}

export async function startE2e(
  prefix: string,
  files: Record<string, string>,
  options: E2eOptions = {},
): Promise<E2eEnv> {
  const node = await startTestNode({ extras: options.extras ?? false });
  const cleanups: (() => Promise<unknown> | undefined)[] = [() => node.stop()];
  const close = async () => {
    for (const c of cleanups.reverse()) await c()?.catch(() => {});
  };
  try {
    const http = new KubeHttp(node.kubeConfig);
    cleanups.push(async () => http.close());
    await installCrds(http);
    const id = randomBytes(3).toString('hex');
    const ns = `${prefix}-${id}`;
    const controllerNs = `${prefix}-sys-${id}`;
    await createNamespace(http, ns);
    await createNamespace(http, controllerNs);
    // What deploy/README.md asks an operator to create: registry credentials (the test registry
    // accepts anyone) and kaniko's S3 credentials.
    await putRegistrySecret(
      http,
      controllerNs,
      'sless-registry-pull',
      dockerConfigJson(node.registryHost, 'pull', id),
    );
    // A password no other string of the run contains, so that finding it anywhere means it leaked.
    const pushPassword = `push-${randomBytes(16).toString('hex')}`;
    await putRegistrySecret(
      http,
      controllerNs,
      'sless-registry-push',
      dockerConfigJson(node.registryHost, 'push', pushPassword),
    );
    await apply(http, SECRET, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'sless-s3', namespace: controllerNs },
      stringData: { AWS_ACCESS_KEY_ID: node.s3.accessKeyId, AWS_SECRET_ACCESS_KEY: node.s3.secretAccessKey },
    });
    const bucket = `${prefix}-${id}`;
    const s3 = new S3Client({
      endpoint: node.s3.endpoint,
      region: node.s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: node.s3.accessKeyId, secretAccessKey: node.s3.secretAccessKey },
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();

    const gitRoot = await tempDir('e2e-git');
    // Reverse order: after the controller that keeps its state in it has stopped. Tests have the run's
    // directory removed for them; benchmarks that use this harness do not.
    cleanups.push(() => rm(gitRoot, { recursive: true, force: true }));
    await git(gitRoot, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    const gitServer = await startGitHttpServer(gitRoot);
    cleanups.push(() => gitServer.close());
    const repo = await TestRepo.create(files);
    cleanups.push(() => repo.remove());
    await git(repo.dir, 'remote', 'add', 'origin', join(gitRoot, 'fns.git'));
    await git(repo.dir, 'push', '--quiet', 'origin', 'main');

    const started = await options.withNode?.(node);
    if (started) cleanups.push(() => started.close());
    const config = loadKubeControllerConfig(
      { host: '127.0.0.1', port: '0', namespace: controllerNs, 'watch-namespaces': ns },
      {
        SLESS_REGISTRY: node.registryHost,
        SLESS_REGISTRY_INSECURE: 'true',
        SLESS_KANIKO_IMAGE: node.images.kaniko,
        // The runtimes' FROM lines name Docker Hub (and gcr.io) images; the node's registry holds them.
        SLESS_KANIKO_REGISTRY_MAP: node.registryMap.join(';'),
        // Outside the cluster and without cluster DNS: reach functions by their ClusterIP.
        SLESS_FUNCTION_ROUTE: 'cluster-ip',
        SLESS_S3_ENDPOINT: node.s3.endpoint,
        SLESS_S3_BUCKET: bucket,
        SLESS_S3_REGION: node.s3.region,
        AWS_ACCESS_KEY_ID: node.s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: node.s3.secretAccessKey,
        SLESS_EXTERNAL_URL: 'http://sless.test',
        // The test's git server listens on loopback, which sources may not reach by default.
        SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
        SLESS_STATE_DIR: join(gitRoot, 'state'),
        ...options.env,
        ...started?.env,
      },
    );
    const system = await startKubeSystem(config, { logger, kubeConfig: node.kubeConfig, pollMs: 500 });
    cleanups.push(() => system.stop());
    await system.store.apply(gitSource('repo', ns, `${gitServer.url}/fns.git`));

    return {
      node,
      http,
      system,
      config,
      repo,
      ns,
      controllerNs,
      secrets: {
        s3AccessKeyId: node.s3.accessKeyId,
        s3SecretAccessKey: node.s3.secretAccessKey,
        pushPassword,
        pushAuth: Buffer.from(`push:${pushPassword}`).toString('base64'),
      },
      commit: async (changes) => {
        const sha = await repo.commit(changes);
        await git(repo.dir, 'push', '--quiet', 'origin', 'main');
        await system.controller.syncNow(ns, 'repo');
        return sha;
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** GET through the controller's /fn/ proxy: [status, body]. */
export async function callFunction(env: E2eEnv, name: string, path = ''): Promise<[number, string]> {
  const res = await fetch(`${env.system.url}/fn/${env.ns}/${name}${path}`, {
    signal: AbortSignal.timeout(15_000),
  });
  return [res.status, await res.text()];
}

/** The digest the registry reports for a tag (what a Deployment must be pinned to). */
export async function registryDigest(node: TestNode, repository: string, tag: string): Promise<string> {
  const res = await fetch(`${node.registry.url}/v2/${repository}/manifests/${tag}`, {
    method: 'HEAD',
    headers: {
      accept: [
        'application/vnd.oci.image.manifest.v1+json',
        'application/vnd.docker.distribution.manifest.v2+json',
        'application/vnd.oci.image.index.v1+json',
        'application/vnd.docker.distribution.manifest.list.v2+json',
      ].join(', '),
    },
  });
  if (!res.ok) throw new Error(`registry has no ${repository}:${tag} (${res.status})`);
  return res.headers.get('docker-content-digest') ?? '';
}

/**
 * Waits until `/fn/{name}{path}` answers 200 with `expected` in its body, and returns the body. Stops at
 * once, with the build's own words, when the function's build failed and nothing of it serves: waiting
 * out the whole build time would only delay the same failure.
 */
export async function servedBody(
  env: E2eEnv,
  name: string,
  expected: string,
  timeoutMs: number,
  path = '',
): Promise<string> {
  const outcome = await eventually(
    `/fn/${name}${path} serves ${expected}`,
    async () => {
      const [code, body] = await callFunction(env, name, path);
      if (code === 200 && body.includes(expected)) return { body };
      const fn = (await env.system.store.get('Function', env.ns, name)) as SlessFunction | undefined;
      const ready = fn?.status?.conditions?.find((c) => c.type === 'Ready');
      if (ready?.reason === 'BuildFailed' && !fn?.status?.servingCommit)
        return { failed: `${name}: ${ready.message ?? 'build failed'}` };
      return undefined;
    },
    timeoutMs,
  );
  if ('failed' in outcome) throw new Error(`/fn/${name}${path} cannot serve: ${outcome.failed}`);
  return outcome.body;
}
