/**
 * Ready means serving, on the real kube-apiserver: a Function is Ready only once its Deployment rolled
 * the revision out, and a revision whose pods never become available is RolloutFailed (Ready=False)
 * with the pods' reason while the previous revision serves /fn/. There is no kubelet or Deployment
 * controller here: the test plays them by writing Deployment and Pod status (markDeploymentAvailable,
 * playCrashLoopingPod), and plays kaniko (markBuildSucceeded). The real crash-looping container is the real node's test.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { isStatus, MERGE_PATCH } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, SERVICE } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markDeploymentAvailable,
  restorePullSecret,
} from './harness.js';
import { playCrashLoopingPod } from './play.js';

const DEADLINE_MS = 3000;

describe('kube platform: Ready means serving', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let upstream: Server;
  let system: KubeSystem;

  /** The Function as `kubectl get -o json` shows it: straight from the API server. */
  const raw = () =>
    env.http.request<{ metadata: { generation: number }; status?: FunctionStatus }>(
      'GET',
      `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions/alpha`,
    );
  /** What `kubectl wait --for=condition=Ready` waits for: Ready=True for the current generation. */
  const kubectlWaitSatisfied = async () => {
    const fn = await raw();
    const ready = fn.status?.conditions?.find((c) => c.type === 'Ready');
    return ready?.status === 'True' && ready.observedGeneration === fn.metadata.generation;
  };

  beforeAll(async () => {
    env = await kubeEnv('rollout');
    const root = await tempDir('kube-rollout-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'one' } }),
      'alpha/handler.js': nodeHandler(`return 'alpha';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    // Stands in for the function's Service: the route resolver is pointed here instead of *.svc.
    upstream = createServer((req, res) => res.end(JSON.stringify({ served: req.url })));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(
      { ...env.config, rolloutDeadlineMs: DEADLINE_MS },
      { logger, kubeConfig: env.cluster.kubeConfig, originOf: () => `http://127.0.0.1:${port}`, pollMs: 100 },
    );
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));
  });

  afterAll(async () => {
    await system?.stop();
    await new Promise((r) => upstream?.close(r));
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('is Deploying until the Deployment is rolled out and available, then Ready (kubectl wait holds)', async () => {
    const first = await git(work.dir, 'rev-parse', 'HEAD');
    await completeBuild(env, 'alpha', first, 'rollout-1');
    await eventually('Deployment', () => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha'));
    await eventually('Deploying', async () => (await raw()).status?.phase === 'Deploying');
    expect(await kubectlWaitSatisfied()).toBe(false);
    // Plays the Deployment controller and kubelet: the pods are up.
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    await eventually('kubectl wait --for=condition=Ready', kubectlWaitSatisfied);
    const fn = await raw();
    expect(fn.status?.phase).toBe('Ready');
    expect(fn.status?.observedGeneration).toBe(fn.metadata.generation);
    expect(fn.status?.conditions?.find((c) => c.type === 'Reconciling')?.status).toBe('False');
  });

  it('a crash-looping revision is RolloutFailed with the pod reason while the old revision serves', async () => {
    const before = (await raw()).status;
    const served = before?.servingRevision;
    expect(served).toBeDefined();
    await work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'two' } }) });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    await system.controller.syncNow(env.ns, 'repo');
    const dep = await eventually('Deployment at the new revision', async () => {
      const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
      return d?.metadata.annotations?.['sless.dev/revision'] !== served ? d : undefined;
    });
    const revision = dep.metadata.annotations?.['sless.dev/revision'] ?? '';
    // Plays the Deployment controller: one new pod created, the old one still up and available.
    await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha/status`, {
      contentType: MERGE_PATCH,
      body: {
        status: {
          observedGeneration: dep.metadata.generation,
          replicas: 2,
          updatedReplicas: 1,
          readyReplicas: 1,
          availableReplicas: 1,
          unavailableReplicas: 1,
        },
      },
    });
    // Plays the kubelet: the new revision's container keeps exiting.
    await playCrashLoopingPod(env.http, env.ns, 'alpha-new-pod', 'alpha', revision);
    const failed = await eventually(
      'RolloutFailed',
      async () => {
        const s = (await raw()).status;
        return s?.conditions?.find((c) => c.type === 'Ready')?.reason === 'RolloutFailed' ? s : undefined;
      },
      DEADLINE_MS + 20_000,
    );
    const ready = failed.conditions?.find((c) => c.type === 'Ready');
    expect(failed.phase).toBe('Failed');
    // Not Ready: the revision the Function asks for does not serve (kubectl wait keeps waiting).
    expect(ready?.status).toBe('False');
    expect(await kubectlWaitSatisfied()).toBe(false);
    expect(ready?.message).toContain(`revision ${revision} not available after 3s`);
    expect(ready?.message).toContain(
      'pod alpha-new-pod: CrashLoopBackOff: back-off 10s restarting failed container',
    );
    expect(ready?.message).toContain('(last exit: Error, code 1)');
    expect(ready?.message).toContain(`still serving ${served}`);
    expect(failed.servingRevision).toBe(served);
    // The old pods keep answering: which revision serves is not decided by Ready.
    const answer = await fetch(`${system.url}/fn/${env.ns}/alpha/x`);
    expect([answer.status, await answer.json()]).toEqual([200, { served: '/x' }]);
    // The proxy's connections belong to the serving revision (a new one gets new connections).
    expect(await system.routes.resolve(env.ns, 'alpha')).toMatchObject({ state: 'ready', revision: served });

    // The pod comes up after all (a dependency was back): the retry finds the rollout done.
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    const recovered = await eventually(
      'Ready at the new revision',
      async () => {
        const s = (await raw()).status;
        return s?.phase === 'Ready' && s.servingRevision === revision ? s : undefined;
      },
      DEADLINE_MS + 30_000,
    );
    expect(recovered.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('Serving');
    await eventually('the route names the new revision', async () => {
      const route = await system.routes.resolve(env.ns, 'alpha');
      return route.state === 'ready' && route.revision === revision ? route : undefined;
    });
    expect(await kubectlWaitSatisfied()).toBe(true);
  });

  // Drift repair, on the Function the tests above left Ready.
  it('a Deployment or Service deleted or edited by hand is put back within seconds', async () => {
    const depBefore = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
    expect(depBefore).toBeDefined();
    const revision = depBefore?.metadata.annotations?.['sless.dev/revision'];

    await env.http.request('DELETE', `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha`);
    const back = await eventually('Deployment put back', async () => {
      const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
      return d && d.metadata.uid !== depBefore?.metadata.uid ? d : undefined;
    });
    expect(back.metadata.annotations?.['sless.dev/revision']).toBe(revision);
    // Plays the Deployment controller and kubelet for the recreated Deployment.
    await markDeploymentAvailable(env.http, env.ns, 'alpha');

    const svcBefore = await getObject<KubeObject>(env.http, SERVICE, env.ns, 'alpha');
    await env.http.request('DELETE', `/api/v1/namespaces/${env.ns}/services/alpha`);
    await eventually('Service put back', async () => {
      const svc = await getObject<KubeObject>(env.http, SERVICE, env.ns, 'alpha');
      return svc && svc.metadata.uid !== svcBefore?.metadata.uid;
    });

    // Someone edits the function's environment in place (a strategic merge patch, as kubectl edit sends).
    await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha`, {
      contentType: 'application/strategic-merge-patch+json',
      body: {
        spec: {
          template: {
            spec: { containers: [{ name: 'function', env: [{ name: 'WORD', value: 'hacked' }] }] },
          },
        },
      },
    });
    await eventually('edited Deployment put back', async () => {
      const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
      const spec = d?.spec as
        | { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
        | undefined;
      const c = spec?.template.spec.containers[0];
      return c?.env?.find((e) => e.name === 'WORD')?.value === 'two' && (c.env?.length ?? 0) > 1;
    });
  });

  it('tells of syncs, builds and rollouts in Events, visible through the API', async () => {
    interface Event {
      type: string;
      reason: string;
      message: string;
      involvedObject: { kind: string; name: string; uid?: string };
      source?: { component?: string };
    }
    const eventsOf = async (kind: string, name: string) =>
      (
        await env.http.request<{ items: Event[] }>('GET', `/api/v1/namespaces/${env.ns}/events`, {
          query: { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` },
        })
      ).items;
    const fnEvents = await eventually('Function events', async () => {
      const items = await eventsOf('Function', 'alpha');
      return items.some((e) => e.reason === 'Serving') ? items : undefined;
    });
    const reasons = new Set(fnEvents.map((e) => `${e.type}/${e.reason}`));
    for (const expected of [
      'Normal/Building',
      'Normal/BuildSucceeded',
      'Normal/Deploying',
      'Warning/RolloutFailed',
      'Normal/Serving',
    ])
      expect(reasons, expected).toContain(expected);
    const failed = fnEvents.find((e) => e.reason === 'RolloutFailed');
    expect(failed?.message).toContain('CrashLoopBackOff');
    expect(failed?.source?.component).toBe('sless-controller');
    expect(failed?.involvedObject.uid).toBe(((await raw()) as { metadata: { uid?: string } }).metadata.uid);
    const sourceEvents = await eventsOf('GitSource', 'repo');
    const synced = sourceEvents.filter((e) => e.reason === 'Synced');
    expect(synced.length).toBeGreaterThanOrEqual(2);
    expect(synced[0]?.message).toMatch(/^applied 1 objects at [0-9a-f]{12} \(1 changed, 0 pruned\)$/);
  });

  it('a replica count set by something else (an HPA, kubectl scale) is left alone by later rollouts', async () => {
    // Scales through the scale subresource under its own field manager, as an HPA does.
    await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/alpha/scale`, {
      contentType: MERGE_PATCH,
      query: { fieldManager: 'test-autoscaler' },
      body: { spec: { replicas: 3 } },
    });
    await work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'three' } }) });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    await system.controller.syncNow(env.ns, 'repo');
    const rolled = await eventually('Deployment at WORD=three', async () => {
      const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
      const spec = d?.spec as {
        replicas?: number;
        template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
      };
      return spec?.template.spec.containers[0]?.env?.some((e) => e.name === 'WORD' && e.value === 'three')
        ? spec
        : undefined;
    });
    expect(rolled.replicas).toBe(3);
    // Plays the Deployment controller and kubelet: three pods of the new revision are up.
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    await eventually('Ready at WORD=three', kubectlWaitSatisfied);
    const scaled = (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha'))?.spec as
      | { replicas?: number }
      | undefined;
    expect(scaled?.replicas).toBe(3);
  });

  it('a missing pull-secret source fails the ensure (503, never 500) and the rollout (RolloutFailed), the old revision serving', async () => {
    // Ready=True holds while a new revision deploys (the old one serves): wait for the rollout itself.
    const servingDeployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
    const before = await eventually('serving the revision the Deployment runs', async () => {
      const fn = await raw();
      const deployed = servingDeployment?.metadata.annotations?.['sless.dev/revision'];
      return fn.status?.phase === 'Ready' && fn.status.servingRevision === deployed ? fn : undefined;
    });
    const served = before.status?.servingRevision;
    const generation = before.metadata.generation;
    // The operator deletes the source of the pull-secret copies.
    await env.http.request('DELETE', `/api/v1/namespaces/${env.controllerNs}/secrets/sless-registry-pull`);
    try {
      const ensure = await fetch(`${system.url}/v1/namespaces/${env.ns}/ensure`, { method: 'POST' });
      expect(ensure.status).toBe(503);
      expect(await ensure.json()).toEqual({
        error: expect.stringContaining(`pull secret ${env.controllerNs}/sless-registry-pull does not exist`),
      });

      await work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { WORD: 'four' } }) });
      await git(work.dir, 'push', '--quiet', 'origin', 'main');
      await system.controller.syncNow(env.ns, 'repo');
      // The rollout of the new generation (an ensure of the serving one fails the same way meanwhile).
      const failed = await eventually('RolloutFailed at the new generation', async () => {
        const fn = await raw();
        const ready = fn.status?.conditions?.find((c) => c.type === 'Ready');
        return fn.metadata.generation > generation &&
          ready?.observedGeneration === fn.metadata.generation &&
          ready.reason === 'RolloutFailed'
          ? fn.status
          : undefined;
      });
      if (!failed) throw new Error('no status');
      const ready = failed.conditions?.find((c) => c.type === 'Ready');
      expect(failed.phase).toBe('Failed');
      expect(ready?.status).toBe('False');
      expect(ready?.message).toContain(`pull secret ${env.controllerNs}/sless-registry-pull does not exist`);
      expect(ready?.message).toContain(`still serving ${served}`);
      expect(failed.servingRevision).toBe(served);
      expect((await fetch(`${system.url}/fn/${env.ns}/alpha/x`)).status).toBe(200);
      // Nothing was rolled: the Deployment is the one that served, untouched.
      const after = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
      expect(after?.metadata.resourceVersion).toBe(servingDeployment?.metadata.resourceVersion);
      expect(after?.metadata.annotations?.['sless.dev/revision']).toBe(served);
    } finally {
      await restorePullSecret(env);
    }
    // The source is back: the retry rolls WORD=four out by itself.
    await eventually(
      'Deployment at WORD=four',
      async () => {
        const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha');
        return d?.metadata.annotations?.['sless.dev/revision'] !== served ? d : undefined;
      },
      30_000,
    );
    await markDeploymentAvailable(env.http, env.ns, 'alpha');
    await eventually('Ready at WORD=four', kubectlWaitSatisfied, 30_000);
    expect((await fetch(`${system.url}/v1/namespaces/${env.ns}/ensure`, { method: 'POST' })).status).toBe(
      200,
    );
  });

  it('a GitSource deleted while no controller runs is finalized, and its Functions pruned, once one starts', async () => {
    const sourcePath = `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/gitsources/repo`;
    const source = await env.http.request<{ metadata: { finalizers?: string[] } }>('GET', sourcePath);
    expect(source.metadata.finalizers).toEqual(['sless.dev/cleanup']);
    await system.stop();
    await env.http.request('DELETE', sourcePath);
    // Held by the finalizer: nothing pruned its Functions yet.
    const deleting = await env.http.request<{ metadata: { deletionTimestamp?: string } }>('GET', sourcePath);
    expect(deleting.metadata.deletionTimestamp).toBeDefined();
    expect((await raw()).metadata.generation).toBeGreaterThan(0);
    system = await startKubeSystem(
      { ...env.config, rolloutDeadlineMs: DEADLINE_MS },
      { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 },
    );
    // Gone means a 404: any other failure (a 403, a refused connection) is not a deletion.
    const gone = (path: string) => async () =>
      env.http
        .request('GET', path)
        .then(() => false)
        .catch((error: unknown) => {
          if (isStatus(error, 404)) return true;
          throw error;
        });
    await eventually(
      'Function alpha pruned',
      gone(`/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions/alpha`),
    );
    await eventually('GitSource finalized', gone(sourcePath));
    await eventually(
      'Deployment removed',
      async () => (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'alpha')) === undefined,
    );
  });
});
