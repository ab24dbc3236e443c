/**
 * Instant rollback on kube against the real kube-apiserver + etcd, S3 and a git server: three
 * commits are built, pinning the first through the API (spec.ref.commit on the real CRD) rolls the
 * Deployment back to the first image with zero new kaniko Jobs, and unpinning rolls forward again.
 *
 * There is no kubelet, kaniko or Deployment controller here: markBuildSucceeded and
 * markDeploymentAvailable play their parts, as in gitops.test.ts.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus, GitSource, GitSourceStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  completeBuild,
  deploymentImage,
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markDeploymentAvailable,
} from './harness.js';

describe('kube platform: instant rollback', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  const commits: string[] = [];

  const status = async () =>
    (await system.store.get('Function', env.ns, 'f'))?.status as FunctionStatus | undefined;
  const jobs = async () =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'f', 'sless.dev/function-namespace': env.ns },
      })
    ).items.map((j) => j.metadata.name);
  const image = () => deploymentImage(env.http, env.ns, 'f');
  const imageOf = (commit: string) => `${env.config.registry}/${env.ns}-f:${commit}@${fakeDigest(commit)}`;
  /** Waits for the Deployment to run this commit's image, plays the rollout, waits for Ready. */
  const servesCommit = async (commit: string) => {
    await eventually(`Deployment at ${commit.slice(0, 12)}`, async () => (await image()) === imageOf(commit));
    await markDeploymentAvailable(env.http, env.ns, 'f');
    await eventually(`f Ready at ${commit.slice(0, 12)}`, async () => {
      const s = await status();
      return s?.phase === 'Ready' && s.servingCommit === commit;
    });
  };
  const pin = (method: 'POST' | 'DELETE', commit?: string) =>
    fetch(`${system.url}/v1/namespaces/${env.ns}/sources/repo/pin`, {
      method,
      ...(commit
        ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ commit }) }
        : {}),
    });

  beforeAll(async () => {
    env = await kubeEnv('rollback');
    const root = await tempDir('kube-rollback-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'f/function.yaml': functionManifest('f'),
      'f/handler.js': nodeHandler(`return 'one';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    commits.push(await git(work.dir, 'rev-parse', 'HEAD'));
    system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));
    for (const body of ['two', 'three', undefined]) {
      const commit = commits[commits.length - 1] as string;
      await completeBuild(env, 'f', commit, commit);
      await servesCommit(commit);
      if (body === undefined) break;
      commits.push(await work.commit({ 'f/handler.js': nodeHandler(`return '${body}';`) }));
      await git(work.dir, 'push', '--quiet', 'origin', 'main');
      await system.controller.syncNow(env.ns, 'repo');
    }
  });

  afterAll(async () => {
    await system?.stop();
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('pinning the first commit rolls back to its image with zero new kaniko Jobs', async () => {
    expect((await jobs()).sort()).toEqual(commits.map((c) => buildName('f', c)).sort());
    const response = await pin('POST', commits[0]);
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { commit: string; source: GitSource };
    expect(answer.commit).toBe(commits[0]);
    expect(answer.source.spec.ref).toEqual({ commit: commits[0] });
    expect((answer.source.status as GitSourceStatus).pinnedCommit).toBe(commits[0]);
    await servesCommit(commits[0] as string);
    expect((await status())?.image).toBe(imageOf(commits[0] as string));
    expect(await jobs()).toHaveLength(3);
  });

  it('refuses a pin to a commit that is not on the branch', async () => {
    const refused = await pin('POST', 'f'.repeat(40));
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: `commit: ${'f'.repeat(40)} is not a commit of branch "main" of GitSource repo`,
    });
    expect(((await system.store.get('GitSource', env.ns, 'repo')) as GitSource).spec.ref).toEqual({
      commit: commits[0],
    });
  });

  it('unpinning rolls forward to the head, again without a build', async () => {
    const response = await pin('DELETE');
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { commit: string; source: GitSource };
    expect(answer.commit).toBe(commits[2]);
    expect(answer.source.spec.ref).toBeUndefined();
    expect((answer.source.status as GitSourceStatus).pinnedCommit).toBeUndefined();
    await servesCommit(commits[2] as string);
    expect(await jobs()).toHaveLength(3);
  });
});
