/**
 * A controller restart on the kube platform, while the branch head is a rejected commit and a
 * function's newest build has failed: what served keeps serving, the rejection reads as before, and
 * nothing is rebuilt or rolled. On kube this holds by construction (every object and its status live
 * in the API server); this test proves it against a real kube-apiserver + etcd, S3 and a git server.
 *
 * There is no kubelet, Job controller or kaniko here: where one would act, the test plays its part
 * (markBuildSucceeded / markBuildFailed / markDeploymentAvailable) and says so.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../src/core/conditions.js';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildFailed,
  markDeploymentAvailable,
} from './harness.js';

describe('kube platform: a controller restart while the head is rejected', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let upstream: Server;
  let system: KubeSystem | undefined;
  let port: number;

  const start = async () => {
    system = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
    });
    return system;
  };
  const call = (name: string) => fetch(`${system?.url}/fn/${env.ns}/${name}/`);
  const sourceStatus = async () =>
    (await system?.store.get('GitSource', env.ns, 'repo'))?.status as GitSourceStatus;
  const fnStatus = async (name: string) =>
    (await system?.store.get('Function', env.ns, name))?.status as FunctionStatus;
  const condition = (s: { conditions?: Condition[] } | undefined, type: string) =>
    s?.conditions?.find((c) => c.type === type);
  const jobs = async () =>
    (await listObjects<KubeObject>(env.http, JOB, { namespace: env.controllerNs })).items
      .map((j) => `${j.metadata.name}/${j.metadata.uid}`)
      .sort();
  const deploymentVersion = async (name: string) =>
    (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name))?.metadata.resourceVersion;

  beforeAll(async () => {
    env = await kubeEnv('restart');
    repo = await startRemoteRepo({
      'alpha/function.yaml': functionManifest('alpha'),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
      'beta/function.yaml': functionManifest('beta'),
      'beta/handler.js': nodeHandler(`return 'beta';`),
    });
    // Stands in for the functions' Services: the route resolver is pointed here instead of *.svc.
    upstream = createServer((req, res) => res.end(JSON.stringify({ served: req.url })));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    port = (upstream.address() as AddressInfo).port;
    await start();
  });

  afterAll(async () => {
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await repo?.close();
    await env?.close();
  });

  it('serves as before, reports the rejection as before, and builds and rolls nothing', async () => {
    const first = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await system?.store.apply(gitSource('repo', env.ns, repo.url));
    for (const name of ['alpha', 'beta']) {
      // Plays kaniko + the Job controller, then the Deployment controller + kubelet.
      await completeBuild(env, name, first, `${name}-1`);
      await eventually(`${name} Deployment`, () => deploymentVersion(name));
      await markDeploymentAvailable(env.http, env.ns, name);
      await eventually(`${name} Ready`, async () => (await fnStatus(name))?.phase === 'Ready');
    }

    // beta's next build fails (plays kaniko failing); alpha keeps its image.
    const second = await repo.push({ 'beta/handler.js': nodeHandler(`return 'beta broken';`) });
    await system?.controller.syncNow(env.ns, 'repo');
    await eventually('beta Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('beta', second)),
    );
    await markBuildFailed(env.http, env.controllerNs, buildName('beta', second), 'kaniko: RUN npm ci failed');
    await eventually('beta failed', async () => (await fnStatus('beta'))?.phase === 'Failed');

    // The head becomes a rejected commit.
    const rejected = await repo.push({ 'alpha/function.yaml': functionManifest('alpha', { memoryMb: 0 }) });
    await system?.controller.syncNow(env.ns, 'repo');
    const before = await sourceStatus();
    expect(before.lastAttemptedCommit).toBe(rejected);
    expect(condition(before, 'Ready')?.reason).toBe('ValidationFailed');
    expect(condition(before, 'Ready')?.message).toContain(`still serving ${second.slice(0, 12)}`);
    await system?.controller.idle();
    const betaBefore = await fnStatus('beta');
    const jobsBefore = await jobs();
    const deploymentsBefore = [await deploymentVersion('alpha'), await deploymentVersion('beta')];

    await system?.stop();
    await start();
    // The route comes from the Deployment in the API server: served at once.
    expect((await call('alpha')).status).toBe(200);
    expect((await call('beta')).status).toBe(200);
    // The restarted controller's own sync of the rejected head, then every reconcile it caused.
    expect((await system?.controller.syncNow(env.ns, 'repo'))?.outcome).toBe('unchanged');
    await system?.controller.idle();
    const after = await sourceStatus();
    expect(after.lastSyncedCommit).toBe(second);
    expect(condition(after, 'Ready')).toEqual(condition(before, 'Ready'));
    expect(condition(after, 'Stalled')).toEqual(condition(before, 'Stalled'));
    const betaAfter = await fnStatus('beta');
    expect(betaAfter.phase).toBe('Failed');
    expect(betaAfter.lastBuild).toEqual(betaBefore.lastBuild);
    expect(condition(betaAfter, 'Ready')?.message).toBe(condition(betaBefore, 'Ready')?.message);
    // No new or replaced Job (the failed build is not tried again), no Deployment rolled.
    expect(await jobs()).toEqual(jobsBefore);
    expect([await deploymentVersion('alpha'), await deploymentVersion('beta')]).toEqual(deploymentsBefore);
    expect((await call('alpha')).status).toBe(200);
    expect((await call('beta')).status).toBe(200);
  });
});
