/**
 * Two controller replicas against the real API server: one leader (a coordination.k8s.io Lease)
 * reconciles, both serve /fn/ and the API. The first part runs two systems in this process, each
 * with its own client; the second runs real `sless controller` child processes, so "the leader is
 * killed" is a real SIGKILL and "shut down" a real SIGTERM.
 *
 * Fakes, as in gitops.test.ts: there is no kubelet or kaniko (the test marks the build Job done and
 * Deployments available), and a plain HTTP server stands in for the function's Service.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import { buildName } from '../../src/core/naming.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { isStatus } from '../../src/platform/kube/http.js';
import { LEASE } from '../../src/platform/kube/leader-election.js';
import { apply, getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { slessType } from '../../src/platform/kube/resource-types.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { ControllerProcess, freePort, readyz } from './controller-process.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  playHealthyKubelet,
} from './harness.js';

interface EventObject extends KubeObject {
  reason: string;
  reportingComponent?: string;
  reportingInstance?: string;
  involvedObject: { kind: string; name: string };
}

interface LeaseRecord {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

async function gitFixture(): Promise<{
  url: string;
  work: TestRepo;
  push: () => Promise<string>;
  close: () => Promise<void>;
}> {
  const root = await tempDir('lease-git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  const server = await startGitHttpServer(root);
  const work = await TestRepo.create({
    'alpha/function.yaml': functionManifest('alpha', { env: { N: '1' } }),
    'alpha/handler.js': nodeHandler(`return 'alpha';`),
  });
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  const push = async () => {
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    return git(work.dir, 'rev-parse', 'HEAD');
  };
  await push();
  return {
    url: `${server.url}/fns.git`,
    work,
    push,
    close: async () => {
      await server.close();
      await work.remove();
    },
  };
}

async function lease(env: KubeEnv, name: string): Promise<LeaseRecord | undefined> {
  return (await getObject<KubeObject>(env.http, LEASE, env.controllerNs, name))?.spec as
    | LeaseRecord
    | undefined;
}

/**
 * sless's own Events in the test namespace. The API server's own loops may write Events there too
 * (a CI run saw one reported by `ipallocator-repair-controller-vm`), and those say nothing about
 * which replica led.
 */
async function events(env: KubeEnv): Promise<EventObject[]> {
  const all = await listObjects<EventObject>(
    env.http,
    { apiVersion: 'v1', kind: 'Event', plural: 'events', namespaced: true },
    { namespace: env.ns },
  );
  return all.items.filter((e) => e.reportingComponent === 'sless.dev/sless-controller');
}

const envOf = async (env: KubeEnv, name: string) =>
  (
    (await getObject<KubeObject>(env.http, slessType('Function'), env.ns, name)) as unknown as
      | SlessFunction
      | undefined
  )?.spec.env;

describe('leader election: two replicas in one process, each with its own client', () => {
  let env: KubeEnv;
  let repo: Awaited<ReturnType<typeof gitFixture>>;
  let upstream: Server;
  let a: KubeSystem | undefined;
  let b: KubeSystem | undefined;
  let stopKubelet: (() => void) | undefined;

  const configFor = (identity: string, timing: typeof FAST): KubeControllerConfig => ({
    ...env.config,
    leaderElection: { ...env.config.leaderElection, identity, advertiseUrl: undefined, timing },
  });
  const start = (identity: string, port: number, timing = FAST) =>
    startKubeSystem(configFor(identity, timing), {
      logger,
      kubeConfig: kubeConfigFromInfo(env.cluster),
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
    });

  beforeAll(async () => {
    env = await kubeEnv('lease');
    repo = await gitFixture();
    // Stands in for the function's Service; it names the function the proxy asked for.
    upstream = createServer((req, res) => res.end(`served ${req.headers['x-forwarded-prefix']}`));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    stopKubelet = playHealthyKubelet(env.http, env.ns);
  });

  afterAll(async () => {
    stopKubelet?.();
    await a?.stop();
    await b?.stop();
    await new Promise((r) => upstream?.close(r));
    await repo?.close();
    await env?.close();
  });

  it('exactly one reconciles, both serve /fn/, a follower hands syncs to the leader, and a stopped leader hands over at once', async () => {
    const port = (upstream.address() as AddressInfo).port;
    // replica-a's Lease lasts 30 s: replica-b leads sooner only if replica-a releases it.
    a = await start('replica-a', port, {
      leaseDurationMs: 30_000,
      renewDeadlineMs: 20_000,
      retryPeriodMs: 500,
    });
    b = await start('replica-b', port);
    expect(a.leadership.isLeader()).toBe(true);
    expect(b.leadership.isLeader()).toBe(false);
    expect((await lease(env, 'sless-controller'))?.holderIdentity).toBe('replica-a');
    // Both say who leads; a follower is ready too (ready means serving, not leading).
    expect((await readyz(a.url))?.leader).toEqual({
      identity: 'replica-a',
      holder: 'replica-a',
      isLeader: true,
    });
    expect((await readyz(b.url))?.leader).toEqual({
      identity: 'replica-b',
      holder: 'replica-a',
      isLeader: false,
    });
    const fromB = await fetch(`${b.url}/v1/leader`);
    expect(await fromB.json()).toEqual({ identity: 'replica-b', holder: 'replica-a', isLeader: false });

    // Positive signal: the source is synced, the build Job made, the Function served, each once.
    const first = await repo.push();
    await apply(
      env.http,
      slessType('GitSource'),
      gitSource('repo', env.ns, repo.url) as unknown as KubeObject,
    );
    const job = buildName('alpha', first);
    await eventually('build Job', () =>
      getObject<KubeObject>(
        env.http,
        { apiVersion: 'batch/v1', kind: 'Job', plural: 'jobs', namespaced: true },
        env.controllerNs,
        job,
      ),
    );
    await markBuildSucceeded(env.http, env.controllerNs, job, fakeDigest('alpha-1'));
    await eventually('alpha Ready', async () => {
      const fn = (await a?.store.get('Function', env.ns, 'alpha')) as SlessFunction | undefined;
      return fn?.status?.phase === 'Ready';
    });
    for (const system of [a, b]) {
      const res = await fetch(`${system.url}/fn/${env.ns}/alpha/x`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(`served /fn/${env.ns}/alpha`);
    }
    // ... and nothing else: every Event came from the leader, and the follower never started a loop.
    const seen = await events(env);
    expect(seen.map((e) => e.reason)).toEqual(expect.arrayContaining(['Synced', 'Serving']));
    expect(new Set(seen.map((e) => e.reportingInstance))).toEqual(new Set(['replica-a']));
    expect(() => b?.controller).toThrow(/has not led yet/);

    // A sync asked of the follower is run by the leader and answered through the follower.
    const second = await repo.work.commit({
      'alpha/function.yaml': functionManifest('alpha', { env: { N: '2' } }),
    });
    await repo.push();
    const viaB = await fetch(`${b.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    expect(viaB.status).toBe(200);
    expect(await viaB.json()).toMatchObject({ outcome: 'synced', commit: second });
    expect(await envOf(env, 'alpha')).toEqual({ N: '2' });

    // The leader shuts down (what SIGTERM does): it releases the Lease and the follower leads at once,
    // long before replica-a's 30 s lease would have run out.
    const before = await lease(env, 'sless-controller');
    expect(before?.leaseDurationSeconds).toBe(30);
    await a.stop();
    a = undefined;
    await eventually('replica-b leads', async () => b?.leadership.isLeader(), 15_000);
    expect(Date.parse((await lease(env, 'sless-controller'))?.acquireTime ?? '')).toBeLessThan(
      Date.parse(before?.renewTime ?? '') + 30_000,
    );
    const after = await lease(env, 'sless-controller');
    expect(after?.holderIdentity).toBe('replica-b');
    expect(after?.leaseTransitions).toBe((before?.leaseTransitions ?? 0) + 1);
    // The new leader reconciles: a commit synced through it reaches the Function.
    await repo.work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { N: '3' } }) });
    await repo.push();
    const direct = await fetch(`${b.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    expect(((await direct.json()) as { outcome: string }).outcome).toBe('synced');
    expect(await envOf(env, 'alpha')).toEqual({ N: '3' });
    await eventually('an Event from replica-b', async () =>
      (await events(env)).some((e) => e.reportingInstance === 'replica-b'),
    );

    // Another candidate wins the Lease (as one would after replica-b failed to renew): replica-b stops
    // reconciling at its next look, and its control loop no longer syncs anything.
    // Like any candidate it writes on the resourceVersion it read; replica-b renewing in between makes
    // the write a 409, and the candidate reads again.
    await eventually('the intruder took the Lease', async () => {
      const held = await getObject<KubeObject>(env.http, LEASE, env.controllerNs, 'sless-controller');
      const now = new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
      try {
        await env.http.request(
          'PUT',
          `/apis/coordination.k8s.io/v1/namespaces/${env.controllerNs}/leases/sless-controller`,
          {
            body: {
              ...held,
              metadata: { ...held?.metadata, annotations: {} },
              spec: {
                holderIdentity: 'intruder',
                leaseDurationSeconds: 60,
                acquireTime: now,
                renewTime: now,
                leaseTransitions: 9,
              },
            },
          },
        );
        return true;
      } catch (error) {
        if (isStatus(error, 409)) return false;
        throw error;
      }
    });
    await eventually('replica-b stopped leading', async () => {
      const info = (await readyz(b?.url ?? ''))?.leader;
      return info?.holder === 'intruder' && !info.isLeader;
    });
    expect(b.leadership.isLeader()).toBe(false);
    await repo.work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { N: '4' } }) });
    await repo.push();
    expect(await b.controller.syncNow(env.ns, 'repo')).toBeUndefined();
    // The leader it would hand the sync to advertises no address: 503, and nothing was applied.
    const refused = await fetch(`${b.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    expect(refused.status).toBe(503);
    expect(await envOf(env, 'alpha')).toEqual({ N: '3' });
  }, 120_000);
});

describe('leader election: real controller processes, SIGKILL and SIGTERM', () => {
  let env: KubeEnv;
  let repo: Awaited<ReturnType<typeof gitFixture>>;
  const processes: ControllerProcess[] = [];

  const controller = async (identity: string, timing: Record<string, string>) => {
    const p = new ControllerProcess(env, identity, await freePort(), {
      SLESS_LEASE_NAME: 'sless-controller-proc',
      ...timing,
    });
    processes.push(p);
    return p;
  };
  const fast = {
    SLESS_LEASE_DURATION: '4s',
    SLESS_LEASE_RENEW_DEADLINE: '3s',
    SLESS_LEASE_RETRY_PERIOD: '500ms',
  };
  // A holder of this lease is taken over only when it releases it (or after 30 s).
  const slow = {
    SLESS_LEASE_DURATION: '30s',
    SLESS_LEASE_RENEW_DEADLINE: '20s',
    SLESS_LEASE_RETRY_PERIOD: '500ms',
  };

  beforeAll(async () => {
    env = await kubeEnv('lease-proc');
    repo = await gitFixture();
  });

  afterEach((context) => {
    if (context.task.result?.state !== 'fail') return;
    for (const p of processes)
      process.stderr.write(`--- last log lines of ${p.identity} ---\n${p.tail.join('\n')}\n`);
  });

  afterAll(async () => {
    for (const p of processes) {
      p.kill('SIGKILL');
      await p.exited;
    }
    await repo?.close();
    await env?.close();
  });

  it('the leader killed with SIGKILL is replaced within the lease duration; one stopped with SIGTERM hands over at once', async () => {
    const p1 = await controller('proc-1', fast);
    expect(await p1.ready()).toEqual({ identity: 'proc-1', holder: 'proc-1', isLeader: true });
    const p2 = await controller('proc-2', slow);
    expect(await p2.ready()).toMatchObject({ holder: 'proc-1', isLeader: false });
    await apply(
      env.http,
      slessType('GitSource'),
      gitSource('repo', env.ns, repo.url) as unknown as KubeObject,
    );
    await eventually(
      'alpha applied by the leader',
      async () => (await envOf(env, 'alpha'))?.N === '1',
      60_000,
    );

    // SIGKILL: nothing is released; proc-2 takes over once proc-1's record has not moved for its
    // lease duration (4 s here).
    p1.kill('SIGKILL');
    const killedAt = Date.now();
    await p1.exited;
    // Meanwhile a sync asked of the follower cannot reach the dead leader: 503, never a silent no-op.
    const during = await fetch(`${p2.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    if (during.status !== 200) expect(during.status).toBe(503);
    await eventually('proc-2 leads', async () => (await readyz(p2.url))?.leader.isLeader, 60_000);
    logger.info({ ms: Date.now() - killedAt }, 'SIGKILL → the other replica leads');
    process.stdout.write(
      `SIGKILL of the leader → the other leads after ${Date.now() - killedAt} ms (lease 4 s)\n`,
    );
    expect((await lease(env, 'sless-controller-proc'))?.holderIdentity).toBe('proc-2');
    await repo.work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { N: '2' } }) });
    await repo.push();
    const synced = await fetch(`${p2.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    expect(await synced.json()).toMatchObject({ outcome: 'synced' });
    expect(await envOf(env, 'alpha')).toEqual({ N: '2' });

    // SIGTERM: proc-2 holds the Lease with a 30 s duration; proc-3 can lead before that only because
    // proc-2 released it on its way out.
    const p3 = await controller('proc-3', fast);
    expect(await p3.ready()).toMatchObject({ holder: 'proc-2', isLeader: false });
    const held = await lease(env, 'sless-controller-proc');
    expect(held?.leaseDurationSeconds).toBe(30);
    p2.kill('SIGTERM');
    const terminatedAt = Date.now();
    await p2.exited;
    await eventually('proc-3 leads', async () => (await readyz(p3.url))?.leader.isLeader, 60_000);
    process.stdout.write(`SIGTERM of the leader → the other leads after ${Date.now() - terminatedAt} ms\n`);
    const taken = await lease(env, 'sless-controller-proc');
    expect(taken?.holderIdentity).toBe('proc-3');
    const renewedBeforeTerm = Date.parse(held?.renewTime ?? '');
    expect(Date.parse(taken?.acquireTime ?? '')).toBeLessThan(renewedBeforeTerm + 30_000);
    await repo.work.commit({ 'alpha/function.yaml': functionManifest('alpha', { env: { N: '3' } }) });
    await repo.push();
    const again = await fetch(`${p3.url}/v1/namespaces/${env.ns}/sources/repo/sync`, { method: 'POST' });
    expect(await again.json()).toMatchObject({ outcome: 'synced' });
    expect(await envOf(env, 'alpha')).toEqual({ N: '3' });
  }, 240_000);
});
