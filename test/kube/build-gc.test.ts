/**
 * Build history on kube against the real kube-apiserver + etcd, S3 (versitygw) and Debian's
 * docker-registry (deletes enabled in test/cluster's registry config): past the limit, a build's
 * kaniko Job, its pod, its S3 context and its registry image all go; the pinned build stays; a
 * replica that does not lead prunes nothing; a deleted Function takes its whole history with it.
 *
 * There is no kubelet, kaniko or Deployment controller here: markBuildSucceeded plays kaniko and the
 * Job controller (including the build pod), markDeploymentAvailable the rollout. The image each
 * build "pushed" is a real manifest the test puts into the registry, whose digest the Job reports.
 */
import { createHash, randomBytes } from 'node:crypto';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { contextKeyOf } from '../../src/platform/kube/build/kaniko-job.js';
import { KubeCodeVerdicts } from '../../src/platform/kube/code-verdicts.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { JOB, POD, slessType } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  deploymentImage,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  markDeploymentAvailable,
} from './harness.js';

const sha256 = (data: Buffer | string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

describe('kube platform: build history past the limit', { timeout: 180_000 }, () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let system: KubeSystem;
  let leading = true;
  let verdicts: KubeCodeVerdicts;
  const commits: string[] = [];
  const digests = new Map<string, string>();
  const keys: string[] = [];

  const repository = () => `${env.ns}-f`;
  const registryUrl = () => env.cluster.registry.url;

  /** What kaniko would push: a small image (config + one layer) tagged with the commit. */
  const pushImage = async (commit: string): Promise<string> => {
    const upload = async (blob: Buffer) => {
      const start = await fetch(`${registryUrl()}/v2/${repository()}/blobs/uploads/`, { method: 'POST' });
      expect(start.status).toBe(202);
      const location = new URL(start.headers.get('location') ?? '', registryUrl());
      location.searchParams.set('digest', sha256(blob));
      const put = await fetch(location, { method: 'PUT', body: blob });
      expect(put.status).toBe(201);
      return { digest: sha256(blob), size: blob.length };
    };
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', commit }));
    const layer = randomBytes(64);
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        config: { mediaType: 'application/vnd.docker.container.image.v1+json', ...(await upload(config)) },
        layers: [
          { mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', ...(await upload(layer)) },
        ],
      }),
    );
    const put = await fetch(`${registryUrl()}/v2/${repository()}/manifests/${commit}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
      body: manifest,
    });
    expect(put.status).toBe(201);
    return sha256(manifest);
  };
  const imageExists = async (commit: string) => {
    const response = await fetch(`${registryUrl()}/v2/${repository()}/manifests/${digests.get(commit)}`, {
      method: 'HEAD',
      headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' },
    });
    return response.status === 200;
  };
  const contextExists = (commit: string) =>
    env.s3.send(new HeadObjectCommand({ Bucket: env.bucket, Key: contextKeyOf(env.ns, 'f', commit) })).then(
      () => true,
      () => false,
    );
  const podExists = async (commit: string) =>
    (await getObject<KubeObject>(env.http, POD, env.controllerNs, `${buildName('f', commit)}-pod`)) !==
    undefined;
  const jobs = async () =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'f', 'sless.dev/function-namespace': env.ns },
      })
    ).items
      .map((j) => j.metadata.name)
      .sort();
  const jobsOf = (...indexes: number[]) => indexes.map((i) => buildName('f', commits[i] as string)).sort();
  const verdictExists = async (commit: string) =>
    (await verdicts.get(keys[commits.indexOf(commit)] ?? '')) !== undefined;
  /** Every piece of a build, as [job, pod, context, image, code-gate verdict] presence. */
  const pieces = async (commit: string) => [
    (await jobs()).includes(buildName('f', commit)),
    await podExists(commit),
    await contextExists(commit),
    await imageExists(commit),
    await verdictExists(commit),
  ];
  const status = async () =>
    (await system.store.get('Function', env.ns, 'f'))?.status as FunctionStatus | undefined;
  const image = () => deploymentImage(env.http, env.ns, 'f');
  const servesCommit = async (commit: string) => {
    await eventually(`Deployment at ${commit.slice(0, 12)}`, async () =>
      (await image())?.endsWith(`:${commit}@${digests.get(commit)}`),
    );
    await markDeploymentAvailable(env.http, env.ns, 'f');
    await eventually(`f Ready at ${commit.slice(0, 12)}`, async () => {
      const s = await status();
      return s?.phase === 'Ready' && s.servingCommit === commit;
    });
  };
  const start = (buildHistory: number) =>
    startKubeSystem(
      { ...env.config, buildHistory, registryDelete: true },
      { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100, isLeader: () => leading },
    );
  const pin = (method: 'POST' | 'DELETE', commit?: string) =>
    fetch(`${system.url}/v1/namespaces/${env.ns}/sources/repo/pin`, {
      method,
      ...(commit
        ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ commit }) }
        : {}),
    });

  beforeAll(async () => {
    env = await kubeEnv('gc');
    verdicts = new KubeCodeVerdicts({ http: env.http, controllerNamespace: env.controllerNs });
    repo = await startRemoteRepo({
      'f/function.yaml': functionManifest('f'),
      'f/handler.js': nodeHandler(`return 'v0';`),
    });
    commits.push(await git(repo.work.dir, 'rev-parse', 'HEAD'));
    system = await start(3);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    for (let i = 0; ; i++) {
      const commit = commits[i] as string;
      await eventually(`build Job at ${commit.slice(0, 12)}`, () =>
        getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('f', commit)),
      );
      digests.set(commit, await pushImage(commit));
      // Every Job completes in the same second, as quick builds do: the history's order must not rest
      // on the Job's whole-second completionTime.
      await markBuildSucceeded(
        env.http,
        env.controllerNs,
        buildName('f', commit),
        digests.get(commit) ?? '',
        '2026-01-01T00:00:00Z',
      );
      await servesCommit(commit);
      keys.push((await status())?.buildKey ?? '');
      // What the code gate stores once it has judged a build key (the gate itself is off here).
      await verdicts.set(keys[i] ?? '', {
        check: { result: 'Passed', message: 'looks fine' },
        commit,
        startedAt: '2026-01-01T00:00:00Z',
        finishedAt: '2026-01-01T00:00:01Z',
      });
      if (i === 3) break;
      commits.push(await repo.push({ 'f/handler.js': nodeHandler(`return 'v${i + 1}';`) }));
      await system.controller.syncNow(env.ns, 'repo');
    }
  });

  afterAll(async () => {
    await system?.stop();
    await repo?.close();
    await env?.close();
  });

  it('after four builds with a limit of three, the oldest build is gone whole: Job, pod, context, image', async () => {
    await eventually('history trimmed to 3', async () => (await jobs()).length === 3);
    expect(await jobs()).toEqual(jobsOf(1, 2, 3));
    expect(await pieces(commits[0] as string)).toEqual([false, false, false, false, false]);
    for (const kept of commits.slice(1)) expect(await pieces(kept)).toEqual([true, true, true, true, true]);
    const events = await env.http.request<{ items: { reason: string; message: string }[] }>(
      'GET',
      `/api/v1/namespaces/${env.ns}/events`,
      { query: { fieldSelector: 'involvedObject.name=f' } },
    );
    expect(events.items.filter((e) => e.reason === 'HistoryPruned').map((e) => e.message)).toEqual([
      `removed 1 build(s) past the history limit of 3: ${keys[0]?.slice(0, 12)}`,
    ]);
    // Nothing more to do: a pass removes nothing.
    expect((await system.gc.collect()).pruned).toEqual([]);
  });

  it('keeps the pinned build past a lower limit, and prunes only on the leader', async () => {
    expect((await pin('POST', commits[1])).status).toBe(200);
    await servesCommit(commits[1] as string);
    await system.stop();
    leading = false;
    system = await start(1);
    expect(await system.gc.collect()).toEqual({ ran: false, pruned: [] });
    expect(await jobs()).toEqual(jobsOf(1, 2, 3));
    leading = true;
    // A pass a reconcile asked for may run first; collect() runs after it either way.
    await system.gc.collect();
    // The newest build (the limit) and the pinned, serving one.
    expect(await jobs()).toEqual(jobsOf(1, 3));
    expect(await pieces(commits[1] as string)).toEqual([true, true, true, true, true]);
    expect(await pieces(commits[2] as string)).toEqual([false, false, false, false, false]);
    await servesCommit(commits[1] as string);
  });

  it('keeps a build whose pods still serve during a rollout, and prunes it once they are gone', async () => {
    // Plays the kubelet: a pod of the pinned revision still runs while the head rolls out.
    const oldPod = `f-old-${commits[1]?.slice(0, 8)}`;
    await env.http.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: oldPod,
          labels: {
            'app.kubernetes.io/component': 'function',
            'app.kubernetes.io/managed-by': 'sless',
            'sless.dev/function': 'f',
          },
        },
        spec: { containers: [{ name: 'function', image: (await image()) ?? '' }] },
      },
    });
    expect((await pin('DELETE')).status).toBe(200);
    await servesCommit(commits[3] as string);
    await system.gc.collect();
    expect(await jobs()).toEqual(jobsOf(1, 3));
    await env.http.request('DELETE', `/api/v1/namespaces/${env.ns}/pods/${oldPod}`, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0 },
    });
    await eventually(
      'old pod gone',
      async () => (await getObject(env.http, POD, env.ns, oldPod)) === undefined,
    );
    await system.gc.collect();
    expect(await jobs()).toEqual(jobsOf(3));
    expect(await pieces(commits[1] as string)).toEqual([false, false, false, false, false]);
  });

  it('a deleted Function takes its whole history with it', async () => {
    await repo.push({
      'f/function.yaml': null,
      'f/handler.js': null,
      'g/function.yaml': functionManifest('g'),
      'g/handler.js': nodeHandler(`return 'g';`),
    });
    await system.controller.syncNow(env.ns, 'repo');
    // Its finalizer holds the Function until the history is gone: once the API server no longer has
    // it, nothing of it is left (garbage collection, which would get there later, is not what did it).
    await eventually(
      'f gone from the API server',
      async () => (await getObject(env.http, slessType('Function'), env.ns, 'f')) === undefined,
    );
    expect(await jobs()).toEqual([]);
    for (const commit of commits) expect(await pieces(commit)).toEqual([false, false, false, false, false]);
  });
});
