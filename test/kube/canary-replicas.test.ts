/**
 * A canary judged across two controller replicas against the real kube-apiserver + etcd: every
 * request goes through the follower, whose proxy splits it and counts the canary's answers; those
 * counts reach the leader only in the follower's signed reports, and a new revision that fails a
 * quarter of its requests is rolled back in the first step on them alone (Ready=False
 * CanaryRolledBack with the figures). The follower's proxy is its main thread, or its gateway
 * thread (whose counts reach the follower's reports through the main thread). The pods, kubelet and
 * EndpointSlices are played as in canary.test.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
import { expectRolledBackInFirstStep } from '../helpers/canary-status.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
  recordResolves,
} from './harness.js';
import { PlayedPods } from './played-pods.js';

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };
const STEPS = [10, 50];
const manifest = (version: string, env: Record<string, string> = {}) =>
  functionManifest('c', {
    env: { VERSION: version, ...env },
    rollout: { canary: { steps: STEPS, stepSeconds: 25, maxErrorRate: 0.05 } },
  });

for (const thread of [false, true]) {
  describe(`kube canary across replicas: the leader judges by the answers its follower counted (${thread ? 'gateway' : 'main'} thread)`, {
    timeout: 240_000,
  }, () => {
    let env: KubeEnv;
    let repo: RemoteRepo;
    let leader: KubeSystem;
    let follower: KubeSystem;
    /** The follower's proxy thread, in the gateway variant. */
    let gateway: Gateway | undefined;
    let played: PlayedPods;
    let stopKubelet: () => void;
    let service: Server;
    let servicePort: number;
    /** Requests the leader's proxy was asked to route: none may be. */
    const resolvedOnLeader: string[] = [];
    /** Requests the follower's main thread was asked to route: none may be, in the gateway variant. */
    const resolvedOnFollowerMain: string[] = [];

    const status = async () => (await leader.store.get('Function', env.ns, 'c'))?.status as FunctionStatus;
    const send = async (count: number) => {
      let errors = 0;
      const bodies = new Map<string, number>();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < count / 8; i++) {
            const response = await fetch(`${follower.url}/fn/${env.ns}/c`);
            const body = await response.text();
            if (response.status >= 500) errors++;
            else bodies.set(body, (bodies.get(body) ?? 0) + 1);
          }
        }),
      );
      return { errors, bodies };
    };

    beforeAll(async () => {
      env = await kubeEnv(thread ? 'canaryreplthread' : 'canaryreplicas');
      played = new PlayedPods(env);
      service = createServer((req, res) => {
        req.resume();
        res.end('service');
      });
      await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
      servicePort = (service.address() as AddressInfo).port;
      repo = await startRemoteRepo({
        'c/function.yaml': manifest('v1'),
        'c/handler.js': nodeHandler(`return 'c';`),
      });
      const start = (identity: string, proxy?: Gateway) => {
        const config: KubeControllerConfig = {
          ...env.config,
          leaderElection: { ...env.config.leaderElection, identity, advertiseUrl: undefined, timing: FAST },
        };
        return startKubeSystem(config, {
          logger,
          kubeConfig: kubeConfigFromInfo(env.cluster),
          originOf: () => `http://127.0.0.1:${servicePort}`,
          endpointOrigin: (address) => played.originOf(address),
          pollMs: 100,
          autoscaleTickMs: 200,
          ...(proxy ? { listener: proxy, gateway: proxy } : {}),
        });
      };
      leader = await start('replica-a');
      gateway = thread ? await Gateway.start('127.0.0.1', 0) : undefined;
      follower = await start('replica-b', gateway);
      recordResolves(leader, resolvedOnLeader);
      recordResolves(follower, resolvedOnFollowerMain);
      stopKubelet = playHealthyKubelet(env.http, env.ns);
      await leader.store.apply(gitSource('repo', env.ns, repo.url));
      const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
      await completeBuild(env, 'c', commit, commit);
      await eventually('c Ready', async () => (await status())?.phase === 'Ready', 30_000);
      await eventually('v1 through the follower', async () => (await send(8)).bodies.get('v1') === 8, 20_000);
    }, 120_000);

    afterAll(async () => {
      stopKubelet?.();
      await follower?.stop();
      await leader?.stop();
      await played?.stop();
      await new Promise((r) => service?.close(r));
      await repo?.close();
      await env?.close();
    });

    it('rolls back in the first step a revision failing a quarter of the requests the follower alone served', async () => {
      expect(leader.leadership.isLeader()).toBe(true);
      expect(follower.leadership.isLeader()).toBe(false);
      const stable = (await status()).servingRevision;
      await repo.push({ 'c/function.yaml': manifest('v3', { FAIL_EVERY: '4' }) });
      await leader.controller.syncNow(env.ns, 'repo');
      await eventually(
        'canary started',
        async () => (await status())?.canary?.phase === 'Progressing',
        60_000,
      );
      await eventually('the follower splits at 10%', async () => {
        const found = follower.routes.cached(env.ns, 'c');
        return found.kind === 'ready' && found.route.canary?.weight === STEPS[0];
      });
      await gateway?.synced();
      const fromMain = resolvedOnFollowerMain.length;
      let seen = 0;
      let errors = 0;
      // Until the canary is decided either way: without the follower's counts the leader sees no
      // answer at all, and the step ends into the next (then promotes) instead.
      const decided = await eventually(
        'the canary decided',
        async () => {
          const tally = await send(80);
          seen += 80;
          errors += tally.errors;
          const canary = (await status())?.canary;
          return canary && (canary.phase !== 'Progressing' || canary.step !== 0) && canary;
        },
        60_000,
      );
      expect(decided.phase).toBe('RolledBack');
      const s = await status();
      expectRolledBackInFirstStep(s, stable, STEPS[0] as number);
      // Every answer the figures hold was counted by the follower: the leader routed no request.
      expect(resolvedOnLeader).toEqual([]);
      // On the thread path the gateway thread split and counted them all: the main thread routed none.
      if (thread) expect(resolvedOnFollowerMain.length).toBe(fromMain);
      expect(s.canary?.figures?.requests).toBeLessThanOrEqual(Math.ceil(seen * 0.1) + 1);
      expect(errors).toBeLessThanOrEqual(Math.ceil(seen * 0.1 * 0.25) + 10);
      process.stderr.write(
        `[kube canary replicas ${thread ? 'thread' : 'main'}] rolled back on ${s.canary?.figures?.requests} follower answers (${errors} errors in ${seen} requests)\n`,
      );
      await eventually(
        'every request to the old revision',
        async () => (await send(40)).bodies.get('v1') === 40,
      );
    });
  });
}
