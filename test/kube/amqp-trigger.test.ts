/**
 * amqp Triggers on kube against the real kube-apiserver + etcd and a real RabbitMQ (Debian's
 * rabbitmq-server): a Trigger from git whose URL comes from a Secret of its namespace consumes its
 * queue on the leader; a message published invokes the function once and is acknowledged; across a
 * leader change (the leader stopped with a message in flight, the follower taking over) every
 * message published before, during and after is delivered once, none twice and none dropped.
 *
 * The kubelet is played (pods are ready at once) and the functions' pods are one local server.
 * "Nothing else happened" is read after a sentinel message: the Trigger's prefetch is 1, so the
 * queue is consumed in order and the sentinel comes last.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import type { TriggerStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { deployFromGit, eventually, type KubeEnv, kubeEnv, logger, playHealthyKubelet } from './harness.js';

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };
const QUEUE = 'jobs';

const triggerManifest = () =>
  `apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: jobs\nspec: ${JSON.stringify({
    type: 'amqp',
    function: 'worker',
    queue: QUEUE,
    secretRef: { name: 'rabbit' },
    maxAttempts: 3,
    prefetch: 1,
  })}\n`;

describe('amqp Triggers on kube against a real RabbitMQ', { timeout: 5 * 60_000 }, () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let broker: RabbitMq;
  let stopKubelet: () => void;
  let connection: ChannelModel;
  let channel: Channel;
  const systems: KubeSystem[] = [];
  /** Deliveries the pods saw, per message tag (`n` of the body). */
  const seen = new Map<string, number>();
  /** Which trigger the deliveries named (the consumer's own header). */
  const triggers = new Set<string>();
  /** The pods hold this message's answer until the test releases it: in flight during the change. */
  const HELD = '9';
  let held: (() => void) | undefined;
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const tag = String((JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { n?: unknown }).n);
      seen.set(tag, (seen.get(tag) ?? 0) + 1);
      triggers.add(String(req.headers['x-sless-trigger']));
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      };
      if (tag === HELD) held = answer;
      else answer();
    });
  });
  let port = 0;

  const start = async (identity: string): Promise<KubeSystem> => {
    const config: KubeControllerConfig = {
      ...env.config,
      leaderElection: { ...env.config.leaderElection, identity, advertiseUrl: undefined, timing: FAST },
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
  const triggerStatus = async (system: KubeSystem) =>
    ((await system.store.get('Trigger', env.ns, 'jobs'))?.status ?? {}) as TriggerStatus;
  const publish = (n: number | string) =>
    channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify({ n })), {
      contentType: 'application/json',
      persistent: true,
    });
  const depth = async () => (await channel.checkQueue(QUEUE)).messageCount;
  const consumers = async () => (await channel.checkQueue(QUEUE)).consumerCount;
  /** Publishes a sentinel and waits until it was delivered: everything queued before it was too. */
  const sentinel = async (name: string) => {
    publish(name);
    await eventually(`sentinel ${name} delivered`, async () => seen.has(name), 60_000);
    expect(seen.get(name)).toBe(1);
  };

  beforeAll(async () => {
    env = await kubeEnv('kamqp');
    broker = await startRabbitMq();
    connection = await amqp.connect(broker.url);
    channel = await connection.createChannel();
    await channel.assertQueue(QUEUE, { durable: true });
    // The Trigger's URL, as an operator stores it: a Secret of the Trigger's namespace.
    await env.http.request('PATCH', `/api/v1/namespaces/${env.ns}/secrets/rabbit`, {
      query: { fieldManager: 'test-admin', force: true },
      contentType: 'application/apply-patch+yaml',
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'rabbit', namespace: env.ns },
        stringData: { url: broker.url },
      },
    });
    repo = await startRemoteRepo({
      'worker/function.yaml': functionManifest('worker', {}),
      'worker/handler.js': nodeHandler(`return 'played by the local server';`),
      'worker/trigger.yaml': triggerManifest(),
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
    await connection?.close().catch(() => undefined);
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await broker?.stop();
    await env?.close();
  });

  it('the leader consumes the queue: a message invokes the function once and is acknowledged', async () => {
    const leader = systems[0] as KubeSystem;
    await eventually(
      'the trigger consumes',
      async () => (await triggerStatus(leader)).consumer === 'consuming',
      60_000,
    );
    expect(await consumers()).toBe(1);
    publish('one');
    await eventually('message one delivered', async () => seen.has('one'), 60_000);
    await sentinel('after-one');
    expect(seen.get('one')).toBe(1);
    expect([...triggers]).toEqual(['jobs']);
    expect(await depth()).toBe(0);
    await eventually('both acknowledged in the status', async () => {
      const status = await triggerStatus(leader);
      return status.acknowledged === 2 ? status : undefined;
    });
  });

  it('across a leader change every message is delivered once: none twice, none dropped', async () => {
    const leader = systems[0] as KubeSystem;
    const follower = await start('replica-b');
    expect(leader.leadership.isLeader()).toBe(true);
    expect(follower.leadership.isLeader()).toBe(false);
    // One consumer only: the follower's Triggers do not consume.
    expect(await consumers()).toBe(1);
    for (let n = 0; n < 40; n++) publish(n);
    await eventually('message 9 in flight on the leader', async () => held !== undefined, 60_000);
    const stopping = stop(leader);
    // Published while the leader stops, its message 9 still in flight (its stop waits for it).
    for (let n = 40; n < 60; n++) publish(n);
    held?.();
    await stopping;
    await eventually('the follower leads', async () => follower.leadership.isLeader(), 60_000);
    await eventually('the follower consumes', async () => (await consumers()) === 1, 60_000);
    for (let n = 60; n < 80; n++) publish(n);
    await sentinel('after-failover');
    const counts = Array.from({ length: 80 }, (_, n) => seen.get(String(n)) ?? 0);
    // None dropped (listed by number), then none twice.
    expect(counts.flatMap((c, n) => (c === 0 ? [n] : []))).toEqual([]);
    expect(
      counts.every((c) => c === 1),
      JSON.stringify(counts),
    ).toBe(true);
    expect(await depth()).toBe(0);
    expect(await consumers()).toBe(1);
  });
});
