/**
 * Transient API failures on the real kube-apiserver: a proxy in front of it answers the Deployment
 * apply with 500s for a while (see api-proxy.ts). The work queue must retry with backoff until the
 * Function is Ready at the new revision, with no further commit or event, and status must say that
 * it is retrying meanwhile. There is no kubelet or kaniko here: the test plays the build's Job
 * (markBuildSucceeded) and says so.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { type ApiProxy, startApiProxy } from './api-proxy.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
  specOf,
} from './harness.js';

describe('kube platform: transient API errors are retried', () => {
  let env: KubeEnv;
  let proxy: ApiProxy;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  let stopKubelet: (() => void) | undefined;

  const status = async () =>
    (await system.store.get('Function', env.ns, 'alpha'))?.status as FunctionStatus | undefined;

  beforeAll(async () => {
    env = await kubeEnv('retry');
    proxy = await startApiProxy(env.cluster.apiServerUrl, env.cluster.caCert, env.cluster.adminToken);
    const root = await tempDir('kube-retry-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'one' } }),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    // Plays the Deployment controller and kubelet: every rollout succeeds; this test is about retries.
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    system = await startKubeSystem(env.config, { logger, kubeConfig: proxy.kubeConfig, pollMs: 100 });
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));
  });

  afterAll(async () => {
    stopKubelet?.();
    await system?.stop();
    await proxy?.close();
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('a Deployment apply failing with 500s is retried until Ready at the new revision', async () => {
    const first = await git(work.dir, 'rev-parse', 'HEAD');
    // Plays kaniko and the Job controller.
    await completeBuild(env, 'alpha', first, 'retry-alpha');
    const ready = await eventually('alpha Ready', async () => {
      const s = await status();
      return s?.phase === 'Ready' ? s : undefined;
    });

    const deploymentPath = `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha`;
    proxy.failNext({
      matches: (method, url) => method === 'PATCH' && url.split('?')[0] === deploymentPath,
      remaining: 3,
    });
    // An env-only change: no build, only a rollout, which hits the failing API.
    await work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'two' } }) });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    await system.controller.syncNow(env.ns, 'repo');

    const after = await eventually(
      'alpha Ready at the new revision',
      async () => {
        const s = await status();
        return s?.phase === 'Ready' && s.servingRevision !== ready.servingRevision ? s : undefined;
      },
      30_000,
    );
    expect(proxy.failed).toEqual([
      `PATCH ${deploymentPath}`,
      `PATCH ${deploymentPath}`,
      `PATCH ${deploymentPath}`,
    ]);
    const dep = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
    const container = specOf<{
      template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
    }>(dep).template.spec.containers[0];
    expect(container?.env?.find((e) => e.name === 'WORD')?.value).toBe('two');
    // Meanwhile status said so: Reconciling with a retry, the API's error as the message.
    const retrying = proxy.statusWrites.filter((w) => w.includes('ProgressingWithRetry'));
    expect(retrying.length).toBeGreaterThanOrEqual(1);
    expect(retrying[0]).toContain('injected by the test proxy');
    const conditions = after.conditions ?? [];
    expect(conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Serving' });
    expect(conditions.find((c) => c.type === 'Reconciling')).toMatchObject({ status: 'False' });
    expect(conditions.every((c) => c.observedGeneration === after.observedGeneration)).toBe(true);
  });
});
