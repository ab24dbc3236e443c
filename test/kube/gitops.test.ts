/**
 * The kube platform end to end against a real kube-apiserver + etcd, S3 (versitygw) and a git server
 * (git http-backend): commits become Function objects, kaniko Jobs, S3 contexts, Deployments and
 * Services, through the same Controller as the local platform. What every platform shows (Ready at a
 * commit, env-only and code commits, failed builds, invalid manifests, a forced sync that changes
 * nothing) is the platform contract's (test/platform/); this file keeps the kube objects behind it.
 *
 * There is no kubelet, Job controller or kaniko here: where one of them would act, the test plays its
 * part (markBuildSucceeded / markBuildFailed / markDeploymentAvailable / playHealthyKubelet in
 * harness.ts) and says so.
 * Fakes: with no pods, a plain HTTP server stands in for every function's Service. It answers with
 * the image of the Deployment the Service would route to (read from the apiserver per request), so a
 * test can tell which revision served it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { list as tarList } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus, GitSource } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB, SECRET, SERVICE } from '../../src/platform/kube/resource-types.js';
import { NETWORK_POLICY } from '../../src/platform/kube/tenant.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildFailed,
  markBuildSucceeded,
  markDeploymentAvailable,
  playHealthyKubelet,
  specOf,
} from './harness.js';

interface Container {
  image: string;
  args?: string[];
  env?: { name: string; value?: string }[];
  resources?: unknown;
}
const containerOf = (o: KubeObject | undefined): Container =>
  specOf<{ template: { spec: { containers: Container[] } } }>(o).template.spec.containers[0] as Container;

describe('kube platform: GitOps loop', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  let upstream: Server;
  let first: string;
  let stopKubelet: (() => void) | undefined;

  const push = () => git(work.dir, 'push', '--quiet', 'origin', 'main');
  const fn = async (name: string) => await system.store.get('Function', env.ns, name);
  const status = async (name: string) => (await fn(name))?.status as FunctionStatus | undefined;
  const buildJobs = async (fnName: string) =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': fnName, 'sless.dev/function-namespace': env.ns },
      })
    ).items;
  const deployment = (name: string) => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
  const waitForJob = (name: string) =>
    eventually(`build Job ${name}`, () => getObject<KubeObject>(env.http, JOB, env.controllerNs, name));
  const commitAndSync = async (files: Record<string, string | null>) => {
    const sha = await work.commit(files);
    await push();
    await system.controller.syncNow(env.ns, 'repo');
    return sha;
  };

  beforeAll(async () => {
    env = await kubeEnv('gitops');
    const root = await tempDir('kube-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha', { env: { ZED: 'z', ALPHA: 'a' }, memoryMb: 256 }),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
      'beta/function.yaml': functionManifest('beta'),
      'beta/handler.js': nodeHandler(`return 'beta';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await push();
    first = await git(work.dir, 'rev-parse', 'HEAD');
    // Stands in for the function's Service: the route resolver is pointed here instead of *.svc. The
    // proxy names the function in X-Forwarded-Prefix (/fn/{ns}/{name}); the answer carries the image
    // its Deployment runs, i.e. the revision a real Service would have routed to.
    upstream = createServer((req, res) => {
      const [, , namespace, name] = String(req.headers['x-forwarded-prefix'] ?? '').split('/');
      const served = async () => {
        const dep = namespace && name ? await deployment(name) : undefined;
        return { served: req.url, image: dep ? containerOf(dep).image : null };
      };
      served().then(
        (body) => res.end(JSON.stringify(body)),
        (error: unknown) => {
          res.statusCode = 502;
          res.end(String(error));
        },
      );
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
    });
    const source: GitSource = gitSource('repo', env.ns, `${gitServer.url}/fns.git`);
    await system.store.apply(source);
  });

  afterAll(async () => {
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  // The labels and annotations every platform sets are the contract's ('ready'); the finalizer that
  // removes a function's kube objects is kube's own.
  it('a pushed commit yields Function objects with the manifest spec and the cleanup finalizer', async () => {
    const alpha = await eventually('alpha applied', () => fn('alpha'));
    expect(alpha.spec).toMatchObject({
      runtime: 'nodejs20',
      entrypoint: 'handler.handle',
      memoryMb: 256,
      env: { ZED: 'z', ALPHA: 'a' },
    });
    expect((alpha.metadata as { finalizers?: string[] }).finalizers).toEqual(['sless.dev/cleanup']);
    // applyPlan applies one object after the other: beta may land a moment after alpha.
    await eventually('beta applied', () => fn('beta'));
  });

  it('creates one kaniko Job per function in the controller namespace, with the right args, labels and tag', async () => {
    const job = await waitForJob(buildName('alpha', first));
    expect(job.metadata.name).toBe(`build-alpha-${first.slice(0, 12)}`);
    const buildKey = (await fn('alpha'))?.metadata.annotations?.['sless.dev/build-key'];
    expect(job.metadata.labels).toMatchObject({
      'sless.dev/function': 'alpha',
      'sless.dev/function-namespace': env.ns,
      'sless.dev/build-key': buildKey,
    });
    const c = containerOf(job);
    expect(c.image).toMatch(/^martizih\/kaniko:v[0-9.]+-alpine@sha256:[0-9a-f]{64}$/);
    const registry = env.config.registry;
    expect(c.args).toEqual(
      expect.arrayContaining([
        // kaniko builds what the credential-free install step prepared (test/security covers why).
        '--context=dir:///workspace',
        `--destination=${registry}/${env.ns}-alpha:${first}`,
        '--digest-file=/dev/termination-log',
      ]),
    );
    expect(c.args?.some((a) => a.includes(':latest'))).toBe(false);
    // kaniko holds no S3 key: the context reaches the install step by a URL presigned for it alone.
    expect(c.env ?? []).toEqual([]);
    const install = (
      (job.spec as { template: { spec: { initContainers: { env: { name: string; value: string }[] }[] } } })
        .template.spec.initContainers[0]?.env ?? []
    ).find((e) => e.name === 'SLESS_CONTEXT_URL');
    const contextUrl = new URL(install?.value ?? '');
    expect(`${contextUrl.origin}${contextUrl.pathname}`).toBe(
      `${env.cluster.s3.endpoint}/${env.bucket}/contexts/${env.ns}/alpha/${first}.tar.gz`,
    );
    await waitForJob(buildName('beta', first));
    expect(await buildJobs('alpha')).toHaveLength(1);
  });

  it('uploads a deterministic build context: Dockerfile, server and code/ without manifests', async () => {
    const object = await env.s3.send(
      new GetObjectCommand({ Bucket: env.bucket, Key: `contexts/${env.ns}/alpha/${first}.tar.gz` }),
    );
    const archive = Buffer.from((await object.Body?.transformToByteArray()) ?? new Uint8Array());
    const entries: { path: string; mtime?: Date; uid?: number; mode?: number }[] = [];
    await new Promise<void>((resolve, reject) => {
      const parser = tarList({
        onReadEntry: (e) => entries.push({ path: e.path, mtime: e.mtime, uid: e.uid, mode: e.mode }),
      });
      parser.on('end', () => resolve());
      parser.on('error', reject);
      parser.end(archive);
    });
    expect(entries.map((e) => e.path)).toEqual(['Dockerfile', 'code/', 'code/handler.js', 'server.js']);
    const mtimes = new Set(entries.filter((e) => !e.path.endsWith('/')).map((e) => e.mtime?.toISOString()));
    expect(mtimes).toEqual(new Set(['2000-01-01T00:00:00.000Z']));
    expect(new Set(entries.map((e) => e.uid ?? 0))).toEqual(new Set([0]));
    console.log(
      'build context of alpha:',
      entries.map((e) => `${(e.mode ?? 0).toString(8)} ${e.path}`).join(', '),
    );
  });

  it('a Job marked done with a digest rolls a Deployment pinned to {registry}/{ns}-{fn}:{sha}@sha256:…', async () => {
    // Plays kaniko + the Job controller: Job Complete and the pod's termination message = digest.
    await markBuildSucceeded(env.http, env.controllerNs, buildName('alpha', first), fakeDigest('alpha-1'));
    await markBuildSucceeded(env.http, env.controllerNs, buildName('beta', first), fakeDigest('beta-1'));
    const dep = await eventually('alpha Deployment', () => deployment('alpha'));
    const c = containerOf(dep);
    expect(c.image).toBe(`${env.config.registry}/${env.ns}-alpha:${first}@${fakeDigest('alpha-1')}`);
    expect(c.env?.map((e) => e.name)).toEqual([
      'ALPHA',
      'ZED',
      'PORT',
      'SLESS_ENTRYPOINT',
      'SLESS_FUNCTION_NAME',
      'SLESS_NAMESPACE',
      'SLESS_TIMEOUT_SEC',
    ]);
    expect(c.resources).toMatchObject({ requests: { memory: '256Mi' }, limits: { memory: '256Mi' } });
    const spec = dep.spec as {
      replicas: number;
      template: { metadata: { annotations: Record<string, string> }; spec: Record<string, unknown> };
    };
    expect(spec.replicas).toBe(1);
    expect(spec.template.metadata.annotations['sless.dev/revision']).toMatch(/^[0-9a-f]{12}-[0-9a-f]{8}$/);
    expect(spec.template.spec.imagePullSecrets).toEqual([{ name: 'sless-registry-pull' }]);
    // The namespace was fresh (never ensured), yet the secret the pods pull with is
    // there, copied from the pull-only source in the controller namespace (never the push secret).
    const pull = await getObject<KubeObject & { type?: string; data?: Record<string, string> }>(
      env.http,
      SECRET,
      env.ns,
      'sless-registry-pull',
    );
    expect(pull?.type).toBe('kubernetes.io/dockerconfigjson');
    expect(pull?.data).toEqual({ '.dockerconfigjson': env.registrySecrets.pull });
    expect(await getObject(env.http, SECRET, env.ns, 'sless-registry-push')).toBeUndefined();
    // The deploy also applied the NetworkPolicy that admits only the controller to function pods.
    expect(await getObject(env.http, NETWORK_POLICY, env.ns, 'sless-functions')).toBeDefined();
    expect(dep.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'Function',
      name: 'alpha',
      uid: (await fn('alpha'))?.metadata.uid,
    });
    const svc = await getObject<KubeObject>(env.http, SERVICE, env.ns, 'alpha');
    expect(specOf<{ ports: { port: number }[] }>(svc).ports[0]?.port).toBe(8080);
    // Ready means serving: no pod is available yet, so the rollout is still under way.
    await eventually('alpha Deploying', async () => (await status('alpha'))?.phase === 'Deploying');
    expect((await status('alpha'))?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
  });

  it('routes /fn/{ns}/{name} and turns Ready only once the Deployment has available replicas; 404 for unknown', async () => {
    const call = (path: string) => fetch(`${system.url}${path}`);
    expect((await call(`/fn/${env.ns}/alpha/x`)).status).toBe(503);
    expect((await call(`/fn/${env.ns}/nope/x`)).status).toBe(404);
    // A commit URL of an unknown function is as unknown as the function.
    expect((await call(`/fn/${env.ns}/nope@${first.slice(0, 12)}/x`)).status).toBe(404);
    expect((await status('alpha'))?.phase).toBe('Deploying');
    // Plays the Deployment controller + kubelet: the pods became ready.
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    const ok = await eventually('alpha routed', async () => {
      const r = await call(`/fn/${env.ns}/alpha/x`);
      return r.status === 200 ? r : undefined;
    });
    expect(await ok.json()).toEqual({ served: '/x', image: containerOf(await deployment('alpha')).image });
    // The commit that serves is the function's own route by its commit URL too (older commits are
    // test/kube/commit-urls.test.ts's).
    await eventually(
      'alpha serving its first commit',
      async () => (await status('alpha'))?.servingCommit === first,
    );
    const byCommit = await call(`/fn/${env.ns}/alpha@${first.slice(0, 12)}/x`);
    expect(byCommit.status).toBe(200);
    expect(((await byCommit.json()) as { served: string }).served).toBe('/x');
    const ready = await eventually('alpha Ready', async () => {
      const s = await status('alpha');
      return s?.phase === 'Ready' ? s : undefined;
    });
    expect(ready.image).toBe(containerOf(await deployment('alpha')).image);
    // From here on, every rollout in the namespace succeeds, as healthy pods would make it.
    stopKubelet = playHealthyKubelet(env.http, env.ns);
  });

  it('prints the kubectl get functions Table view', async () => {
    const table = await env.http.request<{
      columnDefinitions: { name: string }[];
      rows: { cells: unknown[] }[];
    }>('GET', `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions`, {
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });
    const names = table.columnDefinitions.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(['Name', 'Runtime', 'Phase', 'Commit', 'URL', 'Age']));
    const shown = ['Name', 'Runtime', 'Phase', 'Commit', 'URL', 'Age'].map((n) => names.indexOf(n));
    const lines = [
      shown.map((i) => names[i]?.toUpperCase() ?? ''),
      ...table.rows.map((r) => shown.map((i) => String(r.cells[i] ?? ''))),
    ];
    const widths = lines[0]?.map((_, col) => Math.max(...lines.map((l) => (l[col] ?? '').length))) ?? [];
    const text = lines
      .map((l) =>
        l
          .map((cell, col) => cell.padEnd((widths[col] ?? 0) + 3))
          .join('')
          .trimEnd(),
      )
      .join('\n');
    console.log(`kubectl get functions -n ${env.ns}\n${text}`);
    expect(table.rows.length).toBe(2);
    const alphaRow = table.rows.find((r) => r.cells[0] === 'alpha');
    expect(alphaRow?.cells[names.indexOf('Runtime')]).toBe('nodejs20');
    expect(alphaRow?.cells[names.indexOf('URL')]).toBe(`http://sless.test/fn/${env.ns}/alpha`);
  });

  // Kube only: kaniko can fail for reasons outside the code (a registry outage), so a rebuild on
  // request makes the build Job again under its name. What a failed build shows (BuildFailed, Stalled,
  // the old revision serving, no retry loop) is the contract's 'build-fails'.
  it('a rebuild on request replaces the failed Job (and only then) and rolls the fixed build', async () => {
    const lastAlphaCommit = await commitAndSync({
      'alpha/handler.js': nodeHandler(`return 'alpha broken';`),
    });
    await waitForJob(buildName('alpha', lastAlphaCommit));
    // Plays the Job controller: kaniko failed.
    await markBuildFailed(
      env.http,
      env.controllerNs,
      buildName('alpha', lastAlphaCommit),
      'kaniko: RUN npm ci failed',
    );
    await eventually('alpha failed', async () => (await status('alpha'))?.phase === 'Failed');
    await system.controller.idle();
    expect(await buildJobs('alpha')).toHaveLength(2);
    const failed = await getObject<KubeObject>(
      env.http,
      JOB,
      env.controllerNs,
      buildName('alpha', lastAlphaCommit),
    );
    expect(failed).toBeDefined();
    system.controller.retryBuild(env.ns, 'alpha');
    const fresh = await eventually('a new Job of the same name', async () => {
      const job = await getObject<KubeObject>(
        env.http,
        JOB,
        env.controllerNs,
        buildName('alpha', lastAlphaCommit),
      );
      return job && job.metadata.uid !== failed?.metadata.uid ? job : undefined;
    });
    expect(fresh.metadata.name).toBe(buildName('alpha', lastAlphaCommit));
    // Plays kaniko: this time the build works.
    await markBuildSucceeded(env.http, env.controllerNs, fresh.metadata.name, fakeDigest('alpha-3'));
    await eventually('alpha rolled to the rebuilt image', async () =>
      containerOf(await deployment('alpha')).image.endsWith(`${lastAlphaCommit}@${fakeDigest('alpha-3')}`),
    );
    await eventually('alpha Ready', async () => (await status('alpha'))?.phase === 'Ready');
    expect(await buildJobs('alpha')).toHaveLength(2);
  });
});
