/**
 * An always-on function whose Deployment reports no available replica, against a real
 * kube-apiserver + etcd, served from the gateway thread as in production: its `/fn/` requests are
 * held (on the main thread, which the thread hands them to) until the Deployment reports one again,
 * and then answered by the function; beyond the held-request bound the next one gets its 503 at once;
 * a request held past the activation timeout gets a 503 that says it was held.
 *
 * There is no kubelet here: the test writes the Deployment's status itself, as the Deployment
 * controller would when the pods stop and start being ready, and a local HTTP server plays the pods.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  markDeploymentAvailable,
  playHealthyKubelet,
} from './harness.js';

/** How many requests one function may hold (SLESS_ACTIVATION_QUEUE). */
const MAX_HELD = 4;
/** How long one may be held (SLESS_ACTIVATION_TIMEOUT). */
const HOLD_MS = 8_000;

interface Answer {
  status: number;
  body: string;
  /** When it came, against the moment the Deployment was said available again. */
  at: number;
}

describe('kube /fn/: an always-on function with no available replica', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let gateway: Gateway;
  let system: KubeSystem;
  let pod: Server;
  let stopKubelet: (() => void) | undefined;

  const call = async (): Promise<Answer> => {
    const res = await fetch(`${system.url}/fn/${env.ns}/steady/`);
    return { status: res.status, body: await res.text(), at: Date.now() };
  };
  /** Plays the Deployment controller once its pods stop being ready: nothing available. */
  const noneAvailable = () =>
    env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/steady/status`, {
      contentType: MERGE_PATCH,
      body: { status: { readyReplicas: 0, availableReplicas: 0, unavailableReplicas: 1 } },
    });
  const cachedKind = () => system.routes.cached(env.ns, 'steady').kind;

  beforeAll(async () => {
    env = await kubeEnv('replwait');
    pod = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('steady'));
    });
    await new Promise<void>((r) => pod.listen(0, '127.0.0.1', r));
    const port = (pod.address() as AddressInfo).port;
    repo = await startRemoteRepo({
      'steady/function.yaml': functionManifest('steady'),
      'steady/handler.js': nodeHandler(`return 'steady';`),
    });
    gateway = await Gateway.start('127.0.0.1', 0);
    system = await startKubeSystem(
      {
        ...env.config,
        activationTimeoutMs: HOLD_MS,
        activationQueue: MAX_HELD,
        leaderElection: { ...env.config.leaderElection, enabled: false },
      },
      {
        logger,
        kubeConfig: env.cluster.kubeConfig,
        originOf: () => `http://127.0.0.1:${port}`,
        pollMs: 100,
        listener: gateway,
        gateway,
      },
    );
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await completeBuild(env, 'steady', commit, commit);
    await eventually(
      'steady Ready',
      async () =>
        ((await system.store.get('Function', env.ns, 'steady'))?.status as FunctionStatus | undefined)
          ?.phase === 'Ready',
      30_000,
    );
    await eventually('steady answers', async () => (await call()).status === 200, 30_000);
    // From here on the test says what the Deployment has available.
    stopKubelet();
    stopKubelet = undefined;
  }, 120_000);

  afterAll(async () => {
    stopKubelet?.();
    await system?.stop();
    await new Promise((r) => pod?.close(r));
    await repo?.close();
    await env?.close();
  });

  it('holds requests until a replica is available again, and refuses at once past the bound', async () => {
    await noneAvailable();
    await eventually('the route cache sees no available replica', async () => cachedKind() === 'no-replica');
    const held = Array.from({ length: MAX_HELD }, () => call());
    await eventually(
      `${MAX_HELD} requests held`,
      async () => system.routes.heldForReplica(env.ns, 'steady') === MAX_HELD,
    );
    // One more than the bound is not held: its 503 comes while the others still wait.
    const refused = await call();
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toEqual({
      error: `function ${env.ns}/steady has no available replicas, and too many requests are held for one already`,
    });
    expect(system.routes.heldForReplica(env.ns, 'steady')).toBe(MAX_HELD);

    const availableAt = Date.now();
    await markDeploymentAvailable(env.http, env.ns, 'steady');
    const answers = await Promise.all(held);
    expect(answers.map(({ status, body }) => ({ status, body }))).toEqual(
      Array.from({ length: MAX_HELD }, () => ({ status: 200, body: 'steady' })),
    );
    // None was answered before the Deployment said it had a replica again.
    expect(answers.filter((a) => a.at < availableAt)).toEqual([]);
    expect(system.routes.heldForReplica(env.ns, 'steady')).toBe(0);
    expect(await call()).toMatchObject({ status: 200, body: 'steady' });
  });

  it('answers 503 once a request was held for the whole activation timeout, saying so', async () => {
    await noneAvailable();
    await eventually('the route cache sees no available replica', async () => cachedKind() === 'no-replica');
    const sent = Date.now();
    const answer = await call();
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toEqual({
      error: `function ${env.ns}/steady has no available replicas (held ${HOLD_MS / 1000} s for one)`,
    });
    // It was held for the bound, not refused at once.
    expect(answer.at - sent).toBeGreaterThanOrEqual(HOLD_MS - 50);
    expect(system.routes.heldForReplica(env.ns, 'steady')).toBe(0);
    await markDeploymentAvailable(env.http, env.ns, 'steady');
    await eventually('steady answers again', async () => (await call()).status === 200);
  }, 30_000);
});
