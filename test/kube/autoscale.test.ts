/**
 * Concurrency-based autoscaling on kube against the real kube-apiserver + etcd: in-flight `/fn/`
 * requests of a function with `spec.scale` raise its Deployment's replicas through the scale
 * subresource, never past what the load asks for, and the controller's own apply leaves the count
 * alone; status and the instances gauge follow. The kubelet is played (replicas become ready at once)
 * and the pods are one local server that holds requests until told. Scaling no further than max and
 * back to min after are the platform contract's (test/platform/contract.ts), on both platforms.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  afterTicks,
  completeBuild,
  deploymentReplicas,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
} from './harness.js';

describe('kube platform: replicas follow in-flight requests', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let system: KubeSystem;
  let stopKubelet: () => void;
  const held: ServerResponse[] = [];
  const upstream = createServer((req, res) => {
    req.resume();
    held.push(res);
  });

  const fnStatus = async () =>
    (await system.store.get('Function', env.ns, 'busy'))?.status as FunctionStatus | undefined;
  const replicas = () => deploymentReplicas(env.http, env.ns, 'busy');

  const ticks = (times: number) => afterTicks(system.autoscaler, times);

  beforeAll(async () => {
    env = await kubeEnv('autoscale');
    repo = await startRemoteRepo({
      'busy/function.yaml': functionManifest('busy', {
        scale: { min: 1, max: 5, target: 1, stableWindowSec: 6 },
      }),
      'busy/handler.js': nodeHandler(`return 'busy';`),
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    system = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
      autoscaleTickMs: 200,
    });
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await completeBuild(env, 'busy', commit, commit);
    await eventually('busy Ready', async () => {
      const fn = await system.store.get('Function', env.ns, 'busy');
      return (fn?.status as FunctionStatus | undefined)?.phase === 'Ready';
    });
  });

  afterAll(async () => {
    for (const res of held.splice(0)) res.end();
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await env?.close();
  });

  it('scales out to the in-flight requests over the target, no further, and an env commit keeps the count', async () => {
    expect(await replicas()).toBe(1);
    const answers = Array.from({ length: 4 }, () =>
      fetch(`${system.url}/fn/${env.ns}/busy/`).then(async (r) => [r.status, await r.text()] as const),
    );
    await eventually('4 requests held by the pods', async () => held.length >= 4);
    await eventually('scaled out to 4', async () => (await replicas()) === 4, 30_000);
    // Four in flight at target 1 ask for four: more passes do not add a fifth.
    await ticks(10);
    expect(await replicas()).toBe(4);
    // Status (and so `kubectl get functions` and sless_function_instances) follows the Deployment.
    await eventually('status shows 4 instances', async () => {
      const instances = (await fnStatus())?.instances;
      return instances?.desired === 4 && instances.ready === 4;
    });
    expect((await system.app.inject({ url: '/metrics' })).body).toContain(
      `sless_function_instances{namespace="${env.ns}",function="busy",state="ready"} 4`,
    );
    // A commit that changes only env rolls the Deployment: its apply leaves the replicas as scaled.
    const before =
      (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'busy'))?.metadata.generation ?? 0;
    await repo.push({
      'busy/function.yaml': functionManifest('busy', {
        scale: { min: 1, max: 5, target: 1, stableWindowSec: 6 },
        env: { COLOUR: 'blue' },
      }),
    });
    await system.controller.syncNow(env.ns, 'repo');
    const rolled = await eventually('template changed', async () => {
      const d = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'busy');
      return (d?.metadata.generation ?? 0) > before && JSON.stringify(d?.spec).includes('COLOUR')
        ? d
        : undefined;
    });
    expect((rolled.spec as { replicas?: number }).replicas).toBe(4);
    for (const res of held.splice(0)) res.end('done');
    for (const answer of answers) expect(await answer).toEqual([200, 'done']);
  }, 120_000);
});
