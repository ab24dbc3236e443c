/**
 * A build and a rollout in progress read their Job and Deployment when the API server says they
 * moved, not on a timer, on the real kube-apiserver: the controller runs with a 100 ms poll, the test
 * holds the build Job and then the Deployment unfinished for two seconds each (playing kaniko and the
 * Deployment controller, as there is no node here), and counts the controller's reads of each through
 * a proxy. A timed poll would read each about twenty times in that while; a watched wait reads once
 * per change it is told of.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { type ApiProxy, startApiProxy } from './api-proxy.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markDeploymentAvailable,
} from './harness.js';

const HELD_MS = 2000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('kube platform: builds and rollouts wait on watches, not timers', () => {
  let env: KubeEnv;
  let proxy: ApiProxy;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;

  beforeAll(async () => {
    env = await kubeEnv('waits');
    proxy = await startApiProxy(env.cluster.apiServerUrl, env.cluster.caCert, env.cluster.adminToken);
    const root = await tempDir('kube-waits-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha'),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    system = await startKubeSystem(env.config, { logger, kubeConfig: proxy.kubeConfig, pollMs: 100 });
  });

  afterAll(async () => {
    await system?.stop();
    await proxy?.close();
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('reads the build Job and the Deployment once per change, and is Ready soon after each', async () => {
    const commit = await git(work.dir, 'rev-parse', 'HEAD');
    const job = buildName('alpha', commit);
    const jobPath = `/apis/batch/v1/namespaces/${env.controllerNs}/jobs/${job}`;
    const deploymentPath = `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha`;
    const reads = (path: string) => proxy.requests.filter((r) => r === `GET ${path}`).length;
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));

    await eventually(
      'the build Job',
      async () => (await getObject(env.http, JOB, env.controllerNs, job)) !== undefined,
    );
    await pause(HELD_MS);
    const jobReadsWhileHeld = reads(jobPath);
    await completeBuild(env, 'alpha', commit, 'waits-alpha');

    await eventually(
      'the Deployment',
      async () => (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha')) !== undefined,
    );
    await pause(HELD_MS);
    const deploymentReadsWhileHeld = reads(deploymentPath);
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    const status = await eventually('alpha Ready', async () => {
      const s = (await system.store.get('Function', env.ns, 'alpha'))?.status as FunctionStatus | undefined;
      return s?.phase === 'Ready' ? s : undefined;
    });
    expect(status.commit).toBe(commit);
    // Polled every 100 ms, two seconds held would be about twenty reads of each.
    expect(jobReadsWhileHeld).toBeGreaterThanOrEqual(1);
    expect(jobReadsWhileHeld).toBeLessThanOrEqual(4);
    expect(deploymentReadsWhileHeld).toBeGreaterThanOrEqual(1);
    expect(deploymentReadsWhileHeld).toBeLessThanOrEqual(5);
  });
});
