/**
 * amqp Triggers on kube against the real kube-apiserver + etcd and a real RabbitMQ (Debian's
 * rabbitmq-server): a Trigger from git whose URL comes from a Secret of its namespace consumes its
 * queue on the leader; a message published invokes the function once and is acknowledged; across a
 * leader change (the leader stopped with a message in flight, the follower taking over) every
 * message published before, during and after is delivered once, none twice and none dropped.
 * Then two controller processes (test/kube/controller-entry.mjs): a
 * SIGKILL of the leader while it holds messages unacknowledged loses none, the follower delivers
 * each again and acknowledges it once.
 *
 * The kubelet is played (pods are ready at once) and the functions' pods are one local server.
 * "Nothing else happened" is read after a sentinel message: the Trigger's prefetch is 1, so the
 * queue is consumed in order and the sentinel comes last. Retries, dead letters and a disabled
 * Trigger are the platform contract's (test/platform/contract.ts), on both platforms.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KubeControllerConfig } from '../../src/config/kube.js';
import type { TriggerStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { slessType } from '../../src/platform/kube/resource-types.js';
import { kubeConfigFromInfo } from '../cluster/fixture.ts';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { amqpTriggerYaml, type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { type ControllerProcess, FAST_LEASE, printTails, startAgainst } from './controller-process.js';
import {
  deployFromGit,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
  putSecret,
} from './harness.js';

const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };
const QUEUE = 'jobs';

const triggerManifest = () => amqpTriggerYaml('jobs', { queue: QUEUE, maxAttempts: 3, prefetch: 1 });

/** A message's body: its tag. */
interface Body {
  n?: unknown;
}

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
  /** The attempt numbers the pods saw, per message tag. */
  const attempts = new Map<string, number[]>();
  const log: string[] = [];
  /** Which trigger the deliveries named (the consumer's own header). */
  const triggers = new Set<string>();
  /** The pods hold this message's answer until the test releases it: in flight during the change. */
  const HELD = '9';
  let held: (() => void) | undefined;
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Body;
      const tag = String(body.n);
      const attempt = Number(req.headers['x-sless-attempt'] ?? 0);
      seen.set(tag, (seen.get(tag) ?? 0) + 1);
      log.push(
        `${new Date().toISOString()} ${tag}#${attempt} redelivered=${req.headers['x-sless-amqp-redelivered']}`,
      );
      attempts.set(tag, [...(attempts.get(tag) ?? []), attempt]);
      triggers.add(String(req.headers['x-sless-trigger']));
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      };
      // Only the first delivery is held: one sent again is answered, and counted twice below.
      if (tag === HELD && !held) held = answer;
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
  const triggerStatus = async (system: KubeSystem, name = 'jobs') =>
    ((await system.store.get('Trigger', env.ns, name))?.status ?? {}) as TriggerStatus;
  const publish = (n: number | string) =>
    channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify({ n })), {
      contentType: 'application/json',
      persistent: true,
    });
  const depth = async (queue = QUEUE) => (await channel.checkQueue(queue)).messageCount;
  const consumers = async (queue = QUEUE) => (await channel.checkQueue(queue)).consumerCount;
  /** Publishes a sentinel and waits until it was delivered: everything queued before it was too. */
  const sentinel = async (name: string) => {
    publish(name);
    await eventually(`sentinel ${name} delivered`, async () => seen.has(name), 60_000).catch(
      async (error) => {
        // What each side saw when it did not arrive: the pods' attempts, the queue, each replica's view.
        const queue = await channel.checkQueue(QUEUE);
        const views = await Promise.all(
          systems.map(async (s) => ({ leads: s.leadership.isLeader(), status: await triggerStatus(s) })),
        );
        process.stderr.write(
          `${JSON.stringify({ at: new Date().toISOString(), attempts: [...attempts], queue, views, log })}\n`,
        );
        throw error;
      },
    );
    expect(seen.get(name)).toBe(1);
  };

  beforeAll(async () => {
    env = await kubeEnv('kamqp');
    broker = await startRabbitMq();
    connection = await amqp.connect(broker.url);
    channel = await connection.createChannel();
    await channel.assertQueue(QUEUE, { durable: true });
    // The Trigger's URL, as an operator stores it: a Secret of the Trigger's namespace.
    await putSecret(env.http, env.ns, 'rabbit', { url: broker.url });
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

describe('an amqp Trigger on kube across a SIGKILL of the leading controller process', {
  timeout: 5 * 60_000,
}, () => {
  const HELD_COUNT = 5;
  let env: KubeEnv;
  let repo: RemoteRepo;
  let broker: RabbitMq;
  let stopKubelet: (() => void) | undefined;
  let connection: ChannelModel;
  let channel: Channel;
  const processes: ControllerProcess[] = [];
  /** Per message tag: each delivery the pods saw (redelivered or not), and the 2xx they answered. */
  const deliveries = new Map<string, { redelivered: boolean[]; answered: number }>();
  /** While true the pods answer nothing: every message the leader takes stays unacknowledged. */
  let holding = true;
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const tag = String((JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Body).n);
      const entry = deliveries.get(tag) ?? { redelivered: [], answered: 0 };
      deliveries.set(tag, entry);
      entry.redelivered.push(req.headers['x-sless-amqp-redelivered'] === 'true');
      if (holding) return;
      entry.answered++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  const publish = (n: number | string) =>
    channel.sendToQueue('crash', Buffer.from(JSON.stringify({ n })), {
      contentType: 'application/json',
      persistent: true,
    });
  const queue = () => channel.checkQueue('crash');
  const triggerStatus = async () =>
    ((await getObject<KubeObject>(env.http, slessType('Trigger'), env.ns, 'crash'))?.status ??
      {}) as TriggerStatus;
  const controller = (identity: string) =>
    startAgainst(env, upstream, processes, identity, { ...FAST_LEASE, SLESS_LEASE_NAME: 'sless-amqp-kill' });

  beforeAll(async () => {
    env = await kubeEnv('kamqpkill');
    broker = await startRabbitMq();
    connection = await amqp.connect(broker.url);
    channel = await connection.createChannel();
    await channel.assertQueue('crash', { durable: true });
    await putSecret(env.http, env.ns, 'rabbit', { url: broker.url });
    repo = await startRemoteRepo({
      'worker/function.yaml': functionManifest('worker', {}),
      'worker/handler.js': nodeHandler(`return 'played by the local server';`),
      'worker/trigger.yaml': amqpTriggerYaml('crash', { queue: 'crash', prefetch: 10, maxAttempts: 1 }),
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    stopKubelet = playHealthyKubelet(env.http, env.ns);
  });

  afterEach((context) => {
    if (context.task.result?.state !== 'fail') return;
    process.stderr.write(`deliveries: ${JSON.stringify([...deliveries])}\n`);
    printTails(processes);
  });

  afterAll(async () => {
    stopKubelet?.();
    for (const p of processes) await p.dispose();
    await connection?.close().catch(() => undefined);
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await broker?.stop();
    await env?.close();
  });

  it('the messages the killed leader held unacknowledged are all delivered by the follower, each acknowledged once', async () => {
    const a = await controller('replica-a');
    await a.leading();
    const b = await controller('replica-b');
    expect(await b.ready()).toMatchObject({ holder: 'replica-a', isLeader: false });
    await deployFromGit(env, repo.url, 'worker', await git(repo.work.dir, 'rev-parse', 'HEAD'), 60_000);
    await eventually('the leader consumes', async () => (await queue()).consumerCount === 1, 60_000);
    for (let n = 0; n < HELD_COUNT; n++) publish(n);
    // All of them are out to the leader's function, none answered, none acknowledged.
    await eventually(
      'the leader holds every message',
      async () => deliveries.size === HELD_COUNT && (await queue()).messageCount === 0,
      60_000,
    );
    a.kill('SIGKILL');
    await a.exited;
    holding = false;
    // The connection died with the messages unacknowledged: the broker keeps them for the next consumer.
    await b.leading();
    await eventually(
      'every message answered by the follower',
      async () => [...deliveries.values()].every((d) => d.answered === 1),
      60_000,
    );
    // The follower consumes with prefetch 10: a sentinel published now comes after what it redelivered.
    publish('sentinel');
    await eventually('the sentinel answered', async () => deliveries.get('sentinel')?.answered === 1, 60_000);
    const status = await eventually(
      'the follower acknowledged each once',
      async () => {
        const s = await triggerStatus();
        return s.acknowledged === HELD_COUNT + 1 ? s : undefined;
      },
      30_000,
    );
    expect(status.deadLettered).toBe(0);
    for (let n = 0; n < HELD_COUNT; n++) {
      const d = deliveries.get(String(n));
      // Once to the killed leader, once more (marked redelivered) to the follower, answered once.
      expect(d, `message ${n}`).toEqual({ redelivered: [false, true], answered: 1 });
    }
    const after = await queue();
    expect(after.messageCount).toBe(0);
    expect(after.consumerCount).toBe(1);
  });
});
