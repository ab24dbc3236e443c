/**
 * Autoscaling with two controller replicas against the real kube-apiserver + etcd: load that arrives
 * only at the follower reaches the leader's decision through the follower's signed concurrency
 * reports, and the leader scales the Deployment out to it (and back to `min` once it is gone); a
 * report that is not signed with the replicas' key is refused with 401 and changes nothing, and a
 * replaced key is read again once a signature under the old one failed. The
 * kubelet is played (replicas become ready at once) and the pods are one local server that holds
 * requests until told.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import {
  encodeReport,
  REPLICA_REPORT_PATH,
  REPLICA_SIGNATURE_HEADER,
} from '../../src/core/replica-report.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { ReplicaKey } from '../../src/platform/kube/replica-key.js';
import { objectPath, SECRET } from '../../src/platform/kube/resource-types.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
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

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

describe('kube autoscaling across replicas: the leader adds what the followers count', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let leader: KubeSystem;
  let follower: KubeSystem;
  let stopKubelet: () => void;
  const held: ServerResponse[] = [];
  const upstream = createServer((req, res) => {
    req.resume();
    held.push(res);
  });

  const replicas = () => deploymentReplicas(env.http, env.ns, 'busy');

  const ticks = (times: number) => afterTicks(leader.autoscaler, times);

  const report = (body: string, signature?: string) =>
    fetch(`${leader.url}${REPLICA_REPORT_PATH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(signature === undefined ? {} : { [REPLICA_SIGNATURE_HEADER]: signature }),
      },
      body,
    });

  beforeAll(async () => {
    env = await kubeEnv('replicas');
    repo = await startRemoteRepo({
      'busy/function.yaml': functionManifest('busy', {
        scale: { min: 1, max: 5, target: 1, stableWindowSec: 6 },
      }),
      'busy/handler.js': nodeHandler(`return 'busy';`),
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    const start = (identity: string) => {
      const config: KubeControllerConfig = {
        ...env.config,
        leaderElection: { ...env.config.leaderElection, identity, advertiseUrl: undefined, timing: FAST },
      };
      return startKubeSystem(config, {
        logger,
        kubeConfig: kubeConfigFromInfo(env.cluster),
        originOf: () => `http://127.0.0.1:${port}`,
        pollMs: 100,
        autoscaleTickMs: 200,
      });
    };
    leader = await start('replica-a');
    follower = await start('replica-b');
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    await leader.store.apply(gitSource('repo', env.ns, repo.url));
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    await completeBuild(env, 'busy', commit, commit);
    await eventually('busy Ready on both replicas', async () => {
      for (const system of [leader, follower]) {
        const fn = await system.store.get('Function', env.ns, 'busy');
        if ((fn?.status as FunctionStatus | undefined)?.phase !== 'Ready') return false;
      }
      return true;
    });
  });

  afterAll(async () => {
    for (const res of held.splice(0)) res.end();
    stopKubelet?.();
    await follower?.stop();
    await leader?.stop();
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await env?.close();
  });

  it('refuses a report not signed with the replicas’ key, one sent to a follower, and an old one; none changes anything', async () => {
    expect(leader.leadership.isLeader()).toBe(true);
    expect(follower.leadership.isLeader()).toBe(false);
    expect(await replicas()).toBe(1);
    // Well-formed and addressed to the leader: only its signature is wrong. Accepted, four in
    // flight at target 1 would ask for four instances at the next pass.
    const forged = {
      replica: 'intruder',
      leader: 'replica-a',
      sentAt: Date.now(),
      concurrency: { [`${env.ns}/busy`]: 4 },
    };
    const { body } = encodeReport(randomBytes(32), forged);
    for (const signature of [
      undefined,
      encodeReport(randomBytes(32), forged).signature,
      `v1=${'0'.repeat(64)}`,
      'sha256=whatever',
    ]) {
      const answer = await report(body, signature);
      expect(answer.status, `signature ${signature}`).toBe(401);
      expect(answer.headers.get('www-authenticate')).toBe('HMAC realm="sless-replicas"');
      expect(await answer.json()).toEqual({ error: 'the report is not signed with the replicas’ key' });
    }
    // The leader made the replicas' key on the first report it had to check; tenants cannot read it.
    const secret = await getObject<KubeObject>(env.http, SECRET, env.controllerNs, 'sless-replica-key');
    const key = Buffer.from((secret as { data?: { key?: string } } | undefined)?.data?.key ?? '', 'base64');
    expect(key).toHaveLength(32);
    // Signed with the key, a report still counts only at the leader it names, and only when recent
    // (a captured report replayed later is refused).
    const toFollower = encodeReport(key, { ...forged, leader: 'replica-b', sentAt: Date.now() });
    const misdirected = await fetch(`${follower.url}${REPLICA_REPORT_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [REPLICA_SIGNATURE_HEADER]: toFollower.signature },
      body: toFollower.body,
    });
    expect(misdirected.status).toBe(409);
    expect(await misdirected.json()).toEqual({
      error: 'the report is for replica-b; replica-b does not lead',
    });
    const old = encodeReport(key, { ...forged, sentAt: Date.now() - 60_000 });
    const replayed = await report(old.body, old.signature);
    expect(replayed.status).toBe(400);
    expect(((await replayed.json()) as { error: string }).error).toMatch(
      /^the report was sent 6\d{4} ms from the leader's clock \(at most 30000\)$/,
    );
    // Ten passes of the leader later, nothing scaled.
    await ticks(10);
    expect(await replicas()).toBe(1);
  }, 60_000);

  it('scales out to the load the follower alone serves, no further, and back to min after', async () => {
    const answers = Array.from({ length: 3 }, () =>
      fetch(`${follower.url}/fn/${env.ns}/busy/`).then(async (r) => [r.status, await r.text()] as const),
    );
    await eventually('3 requests held by the pods', async () => held.length >= 3);
    // They are the follower's: the leader counts none of its own.
    expect(follower.autoscaler.inflightOf(env.ns, 'busy')).toBe(3);
    expect(leader.autoscaler.inflightOf(env.ns, 'busy')).toBe(0);
    await eventually('scaled out to 3', async () => (await replicas()) === 3, 30_000);
    // Three in flight at target 1 ask for three: more passes do not add a fourth.
    await ticks(10);
    expect(await replicas()).toBe(3);
    for (const res of held.splice(0)) res.end('done');
    for (const answer of answers) expect(await answer).toEqual([200, 'done']);
    await eventually('back to min', async () => (await replicas()) === 1, 60_000);
    await ticks(10);
    expect(await replicas()).toBe(1);
  }, 120_000);

  it('reads a replaced key again once a signature under the old one failed, at most once per reread period', async () => {
    const keyOf = (rereadMs: number) =>
      new ReplicaKey({
        http: env.http,
        logger,
        namespace: env.controllerNs,
        name: 'sless-replica-key',
        identity: 'replica-c',
        rereadMs,
      });
    const eager = keyOf(0);
    const patient = keyOf(3_600_000);
    const before = await eager.get();
    expect(await patient.get()).toEqual(before);
    const rotated = randomBytes(32);
    await env.http.request('PATCH', objectPath(SECRET, env.controllerNs, 'sless-replica-key'), {
      contentType: MERGE_PATCH,
      body: { data: { key: rotated.toString('base64') } },
    });
    // Kept while every signature verifies.
    expect(await eager.get()).toEqual(before);
    eager.mismatch();
    patient.mismatch();
    expect(await eager.get()).toEqual(rotated);
    // Read within the hour already: a failed signature does not make it read again.
    expect(await patient.get()).toEqual(before);
  });
});
