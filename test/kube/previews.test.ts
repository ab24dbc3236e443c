/**
 * Branch previews on kube against the real kube-apiserver + etcd, S3 and a git server over smart
 * HTTP: a pushed branch becomes Function objects of its own and their Deployments, one changed
 * function makes one build Job (kept under the previewed function's name, so main reuses it),
 * an idle preview rests at zero, `/fn/{ns}/{name}@{label}` routes to the preview's workload (waking
 * it) while the plain path routes to main's, and a deleted branch takes its Functions and Deployments with it.
 *
 * There is no kubelet, kaniko or EndpointSlice controller: markBuildSucceeded, playHealthyKubelet and
 * playEndpointSlices play their parts, and one local HTTP server stands in for every pod; the route
 * resolver says which function's workload it picked through `originOf`.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import { LABEL_PREVIEW, LABEL_PREVIEW_OF } from '../../src/core/previews.js';
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { LABEL_FUNCTION } from '../../src/platform/kube/labels.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  markDeploymentAvailable,
  playHealthyKubelet,
} from './harness.js';
import { playEndpointSlices } from './play.js';

describe('kube platform: branch previews', () => {
  let env: KubeEnv;
  let remote: RemoteRepo;
  let upstream: Server;
  let system: KubeSystem;
  let stopKubelet: () => void;
  let stopEndpoints: () => void;
  let main = '';
  let branch = '';
  /** The function whose workload the route resolver picked, request by request. */
  const routed: string[] = [];

  const fn = (name: string) => system.store.get('Function', env.ns, name);
  const status = async (name: string) => (await fn(name))?.status as FunctionStatus | undefined;
  const deployment = (name: string) => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
  const jobsOf = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { [LABEL_FUNCTION]: name, 'sless.dev/function-namespace': env.ns },
      })
    ).items
      .map((job) => job.metadata.name)
      .sort();
  const functionNames = async () =>
    (await system.store.list('Function', { namespace: env.ns })).map((f) => f.metadata.name).sort();
  const sync = () => system.controller.syncNow(env.ns, 'repo', { force: true });
  const call = async (path: string) => {
    const before = routed.length;
    const response = await fetch(`${system.url}/fn/${env.ns}/${path}`);
    return { status: response.status, routedTo: routed.slice(before) };
  };

  beforeAll(async () => {
    env = await kubeEnv('previews');
    remote = await startRemoteRepo({
      'alpha/function.yaml': functionManifest('alpha'),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
      'beta/function.yaml': functionManifest('beta'),
      'beta/handler.js': nodeHandler(`return 'beta';`),
    });
    main = await git(remote.work.dir, 'rev-parse', 'HEAD');
    upstream = createServer((_req, res) => res.end('{}'));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      originOf: (_namespace, name) => {
        routed.push(name);
        return `http://127.0.0.1:${port}`;
      },
      pollMs: 100,
      idleSweepMs: 200,
    });
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    stopEndpoints = playEndpointSlices(env.http, env.ns);
    await system.store.apply(
      gitSource('repo', env.ns, remote.url, { previews: { branches: ['feature/*'], idleSeconds: 2 } }),
    );
    for (const name of ['alpha', 'beta']) {
      await eventually(`${name} build Job`, () =>
        getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName(name, main)),
      );
      await markBuildSucceeded(env.http, env.controllerNs, buildName(name, main), fakeDigest(`${name}-1`));
      await eventually(`${name} Deployment`, () => deployment(name));
      await markDeploymentAvailable(env.http, env.ns, name);
    }
  }, 120_000);

  afterAll(async () => {
    stopEndpoints?.();
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await remote?.close();
    await env?.close();
  });

  it('makes the branch’s Functions and one build Job for its one changed function', async () => {
    await git(remote.work.dir, 'checkout', '--quiet', '-b', 'feature/x');
    branch = await remote.work.commit({ 'alpha/handler.js': nodeHandler(`return 'alpha on x';`) });
    await git(remote.work.dir, 'push', '--quiet', 'origin', 'feature/x');
    await git(remote.work.dir, 'checkout', '--quiet', 'main');
    await sync();
    expect(await functionNames()).toEqual(['alpha', 'alpha--feature-x', 'beta', 'beta--feature-x']);
    const preview = await fn('alpha--feature-x');
    expect(preview?.metadata.labels).toMatchObject({
      [LABEL_PREVIEW]: 'feature-x',
      [LABEL_PREVIEW_OF]: 'alpha',
    });
    // The changed function's build is alpha's, at the branch's commit; beta's code is main's: no Job.
    await eventually('the branch build Job', async () => (await jobsOf('alpha')).length === 2);
    expect(await jobsOf('alpha')).toEqual([buildName('alpha', main), buildName('alpha', branch)].sort());
    expect(await jobsOf('beta')).toEqual([buildName('beta', main)]);
    expect([await jobsOf('alpha--feature-x'), await jobsOf('beta--feature-x')]).toEqual([[], []]);
    await markBuildSucceeded(env.http, env.controllerNs, buildName('alpha', branch), fakeDigest('alpha-x'));
    await eventually('preview Deployments', async () =>
      (await deployment('alpha--feature-x')) && (await deployment('beta--feature-x')) ? true : undefined,
    );
    // Main's Deployment still runs main's build.
    const image = (d: KubeObject | undefined) =>
      (d?.spec as { template: { spec: { containers: { image: string }[] } } } | undefined)?.template.spec
        .containers[0]?.image;
    expect(image(await deployment('alpha'))).toContain(fakeDigest('alpha-1'));
    expect(image(await deployment('alpha--feature-x'))).toContain(fakeDigest('alpha-x'));
    expect(image(await deployment('beta--feature-x'))).toContain(fakeDigest('beta-1'));
    expect((await status('alpha'))?.commit).toBe(main);
    const source = (await system.store.get('GitSource', env.ns, 'repo'))?.status as
      | GitSourceStatus
      | undefined;
    expect(source?.previews).toEqual([
      {
        branch: 'feature/x',
        label: 'feature-x',
        commit: branch,
        urls: [`/fn/${env.ns}/alpha@feature-x`, `/fn/${env.ns}/beta@feature-x`],
      },
    ]);
  });

  it('rests an idle preview at zero while main’s Deployment keeps its replica', async () => {
    const replicas = async (name: string) =>
      ((await deployment(name))?.spec as { replicas?: number } | undefined)?.replicas;
    await eventually(
      'alpha--feature-x at zero',
      async () => (await replicas('alpha--feature-x')) === 0,
      30_000,
    );
    expect(await replicas('alpha')).toBe(1);
  });

  it('routes name@label to the preview’s workload (woken from zero) and the plain path to main’s', async () => {
    await eventually('alpha@feature-x served', async () => {
      const { status: code, routedTo } = await call('alpha@feature-x/');
      return code === 200 && routedTo.includes('alpha--feature-x') ? true : undefined;
    });
    const plain = await call('alpha/');
    expect(plain).toEqual({ status: 200, routedTo: ['alpha'] });
    const missing = await call('alpha@feature-nope/');
    expect(missing).toEqual({ status: 404, routedTo: [] });
  });

  it('removes a deleted branch’s Functions and Deployments, and leaves main’s', async () => {
    await git(remote.work.dir, 'push', '--quiet', 'origin', '--delete', 'feature/x');
    await sync();
    expect(await functionNames()).toEqual(['alpha', 'beta']);
    await eventually('preview Deployments gone', async () =>
      !(await deployment('alpha--feature-x')) && !(await deployment('beta--feature-x')) ? true : undefined,
    );
    expect(await deployment('alpha')).toBeDefined();
    expect((await call('alpha@feature-x/')).status).toBe(404);
    expect((await call('alpha/')).status).toBe(200);
  });
});
