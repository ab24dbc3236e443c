/**
 * Asynchronous invocations on kube against the real kube-apiserver + etcd and a real RabbitMQ
 * (Debian's rabbitmq-server), whose stream journals them: a dead-lettered invocation is replayed
 * and succeeds; a callback to a loopback, link-local or metadata address is refused with 400 and
 * nothing stored. Two hundred invocations of
 * a function failing 30% of the time at random each end succeeded or dead-lettered, none lost and
 * none succeeding twice, across a restart of the controller and across a failover from the leader
 * to a follower that the follower's clients posted to. A single invocation's attempts (a 4xx final,
 * a 5xx retried to its budget) are the platform contract's 'async' case (test/platform).
 *
 * The kubelet is played (pods are ready at once) and the functions' pods are one local server.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import type { InvocationAttempt, InvocationState } from '../../src/core/invocations.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
import { expectCallbackRefused, withCallback } from '../helpers/async-callbacks.js';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { deployFromGit, eventually, type KubeEnv, kubeEnv, logger, playHealthyKubelet } from './harness.js';

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

interface View {
  id: string;
  state: InvocationState;
  attempts: InvocationAttempt[];
  result?: { status: number; body: string };
}

describe('asynchronous invocations on kube, journaled in RabbitMQ', { timeout: 5 * 60_000 }, () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let broker: RabbitMq;
  let stopKubelet: () => void;
  const systems: KubeSystem[] = [];
  /** Attempts the pods saw, per invocation id. */
  const seen = new Map<string, number>();
  /** 2xx answers the pods gave, per invocation id. */
  const answered2xx = new Map<string, number>();
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-sless-invocation-id'] ?? '');
      const attempt = Number(req.headers['x-sless-attempt'] ?? 0);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      const url = req.url ?? '';
      let status = 200;
      if (url.includes('/flaky')) status = Math.random() < 0.3 ? 500 : 200;
      else if (url.includes('/healing')) status = healed ? 200 : 500;
      if (status < 300) answered2xx.set(id, (answered2xx.get(id) ?? 0) + 1);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, attempt, url }));
    });
  });
  /** `/healing` answers 500 until the test fixes it, as a downstream outage would end. */
  let healed = false;
  let port = 0;

  const start = async (identity: string): Promise<KubeSystem> => {
    const config: KubeControllerConfig = {
      ...env.config,
      leaderElection: { ...env.config.leaderElection, identity, advertiseUrl: undefined, timing: FAST },
      asyncInvocations: { amqpUrl: broker.url, stream: `sless.invocations.${env.ns}` },
    };
    const system = await startKubeSystem(config, {
      logger,
      kubeConfig: kubeConfigFromInfo(env.cluster),
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
    });
    systems.push(system);
    return system;
  };
  const stop = async (system: KubeSystem) => {
    await system.stop();
    systems.splice(systems.indexOf(system), 1);
  };
  const api = (system: KubeSystem, path: string, init?: RequestInit) =>
    fetch(`${system.url}/v1/namespaces/${env.ns}${path}`, init);
  const view = async (system: KubeSystem, id: string): Promise<View> => {
    const response = await api(system, `/invocations/${id}`);
    expect(response.status).toBe(200);
    return (await response.json()) as View;
  };
  const ended = (system: KubeSystem, id: string, state: InvocationState) =>
    eventually(
      `invocation ${id} ${state}`,
      async () => {
        const v = await view(system, id);
        return v.state === state ? v : undefined;
      },
      60_000,
    );
  /**
   * Posts until it gets its 202 (a 503 while no replica leads is tried again, and so is a moment
   * with no controller at all, during a restart).
   */
  const enqueue = async (system: () => KubeSystem | undefined, path: string, index = 0): Promise<string> => {
    for (;;) {
      const viaPrefer = index % 2 === 0;
      const target = system();
      if (!target) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      const response = await fetch(`${target.url}/${viaPrefer ? 'fn' : 'fn-async'}/${env.ns}/worker${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(viaPrefer ? { prefer: 'respond-async' } : {}) },
        body: JSON.stringify({ index }),
      }).catch(() => undefined);
      if (response?.status === 202) {
        const body = (await response.json()) as { id: string; location: string };
        expect(response.headers.get('location')).toBe(`/v1/namespaces/${env.ns}/invocations/${body.id}`);
        return body.id;
      }
      // 429 and 503: not taken, send again. 502: a hand-off to a leader that went away after the
      // request reached it; it may have been stored, under an id this client never learns, so the
      // client sends again as a user would, and that copy is not one of the ids accounted for.
      if (response && response.status !== 429 && response.status !== 503) {
        const text = await response.text();
        if (response.status !== 502 || !text.includes('it may have been carried out'))
          throw new Error(`enqueue ${index}: ${response.status} ${text}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const enqueueAll = async (
    system: () => KubeSystem | undefined,
    count: number,
    onAccepted?: (accepted: number) => void,
  ): Promise<string[]> => {
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < count) {
          const index = next++;
          ids.push(await enqueue(system, '/flaky', index));
          onAccepted?.(ids.length);
        }
      }),
    );
    return ids;
  };
  /** Every id ended once, succeeded or dead-lettered, with at most one success and every attempt used. */
  const expectAccounted = async (system: KubeSystem, ids: string[]) => {
    expect(new Set(ids).size).toBe(ids.length);
    const views = await Promise.all(
      ids.map((id) =>
        eventually(
          `invocation ${id} ended`,
          async () => {
            const v = await view(system, id);
            return v.state === 'succeeded' || v.state === 'dead-lettered' ? v : undefined;
          },
          120_000,
        ),
      ),
    );
    let dead = 0;
    for (const v of views) {
      const successes = v.attempts.filter((a) => a.status !== undefined && a.status < 300);
      const counted = v.attempts.filter((a) => !a.interrupted);
      if (v.state === 'succeeded') {
        expect(successes, JSON.stringify(v)).toHaveLength(1);
        expect(counted.at(-1)?.status).toBe(200);
      } else {
        dead++;
        expect(successes).toHaveLength(0);
        expect(counted).toHaveLength(3);
        expect(counted.every((a) => a.status === 500)).toBe(true);
      }
      // The pods answered 2xx at most once, unless a stop cut an attempt whose answer was on its way.
      if (!v.attempts.some((a) => a.interrupted)) expect(answered2xx.get(v.id) ?? 0).toBe(successes.length);
    }
    return { succeeded: views.length - dead, dead };
  };

  beforeAll(async () => {
    env = await kubeEnv('kasync');
    broker = await startRabbitMq();
    repo = await startRemoteRepo({
      'worker/function.yaml': functionManifest('worker', {
        async: { maxAttempts: 3, backoffMs: 20, concurrency: 16 },
      }),
      'worker/handler.js': nodeHandler(`return 'played by the local server';`),
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    port = (upstream.address() as AddressInfo).port;
    await start('replica-a');
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await deployFromGit(env, repo.url, 'worker', await git(repo.work.dir, 'rev-parse', 'HEAD'));
  });

  afterAll(async () => {
    stopKubelet?.();
    for (const system of [...systems].reverse()) await system.stop();
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await broker?.stop();
    await env?.close();
  });

  const only = () => {
    const system = systems[0];
    if (!system) throw new Error('no controller runs');
    return system;
  };

  it('a dead-lettered invocation is replayed with a fresh budget and succeeds once the function does', async () => {
    const id = await enqueue(only, '/healing');
    const dead = await ended(only(), id, 'dead-lettered');
    expect(dead.attempts.map((a) => a.status)).toEqual([500, 500, 500]);
    healed = true;
    const replay = await api(only(), `/invocations/${id}/replay`, { method: 'POST' });
    expect(replay.status).toBe(202);
    const done = await ended(only(), id, 'succeeded');
    expect(done.attempts.map((a) => a.status)).toEqual([500, 500, 500, 200]);
    expect(JSON.parse(done.result?.body ?? '{}')).toMatchObject({ id, attempt: 4, url: '/healing' });
    expect(seen.get(id)).toBe(4);
    const letters = (await (await api(only(), '/dead-letters')).json()) as { items: View[] };
    expect(letters.items.map((v) => v.id)).not.toContain(id);
    // Succeeded is final: a second replay is refused and nothing runs again.
    const again = await api(only(), `/invocations/${id}/replay`, { method: 'POST' });
    expect(again.status).toBeGreaterThanOrEqual(400);
    expect(again.status).toBeLessThan(500);
    expect(seen.get(id)).toBe(4);
  });

  // This environment allows 127.0.0.1/32 (an admin's allowance, for the test git server); every
  // other loopback, link-local or metadata address stays refused.
  it.each(['http://127.0.0.2:9/result', 'http://[::1]:9/result', 'http://169.254.169.254/latest'])(
    'a callback to %s is refused with a 400 before anything is stored',
    async (callback) => {
      const stored = async () => {
        let total = 0;
        for (const state of ['queued', 'running', 'succeeded', 'failed', 'dead-lettered'] as const) {
          const response = await api(only(), `/invocations?state=${state}&limit=1000`);
          total += ((await response.json()) as { items: View[] }).items.length;
        }
        return total;
      };
      const before = await stored();
      const attemptsBefore = [...seen.values()].reduce((a, b) => a + b, 0);
      await expectCallbackRefused(
        await fetch(`${only().url}/fn-async/${env.ns}/worker/hello`, withCallback(callback)),
      );
      expect(await stored()).toBe(before);
      expect([...seen.values()].reduce((a, b) => a + b, 0)).toBe(attemptsBefore);
    },
  );

  it('200 invocations failing 30% of the time across a restart of the controller: none lost, none succeeding twice', async () => {
    let restarted: Promise<void> | undefined;
    const ids = await enqueueAll(
      () => systems[0],
      200,
      (accepted) => {
        if (accepted === 80 && !restarted)
          restarted = (async () => {
            await eventually('attempts running', async () => {
              const response = await api(only(), '/invocations?state=running&limit=1000');
              return ((await response.json()) as { items: View[] }).items.length > 0;
            });
            await stop(only());
            await start('replica-a');
          })();
      },
    );
    await restarted;
    expect(restarted).toBeDefined();
    const counts = await expectAccounted(only(), ids);
    expect(counts.succeeded + counts.dead).toBe(200);
    expect(counts.succeeded).toBeGreaterThan(150);
  });

  it('200 invocations posted to a follower across a failover: the follower takes over and loses none', async () => {
    const leader = only();
    const follower = await start('replica-b');
    expect(leader.leadership.isLeader()).toBe(true);
    expect(follower.leadership.isLeader()).toBe(false);
    // Only the leader runs workers: a follower's would resume the leader's open invocations too.
    expect(leader.asyncInvocations?.dispatcher()).toBeDefined();
    expect(follower.asyncInvocations?.dispatcher()).toBeUndefined();
    let failedOver: Promise<void> | undefined;
    const ids = await enqueueAll(
      () => follower,
      200,
      (accepted) => {
        if (accepted === 80 && !failedOver)
          failedOver = (async () => {
            await stop(leader);
            await eventually('the follower leads', async () => follower.leadership.isLeader());
          })();
      },
    );
    await failedOver;
    expect(follower.leadership.isLeader()).toBe(true);
    await eventually('the new leader runs the workers', async () => follower.asyncInvocations?.dispatcher());
    const counts = await expectAccounted(follower, ids);
    expect(counts.succeeded + counts.dead).toBe(200);
    // The follower answered reads of what the old leader ran, from its own tail of the stream.
    expect(follower.asyncInvocations?.store.size()).toBeGreaterThanOrEqual(204);
  });
});
