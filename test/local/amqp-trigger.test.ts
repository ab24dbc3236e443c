/**
 * amqp Triggers against a real RabbitMQ (Debian's rabbitmq-server, started for this file on free
 * ports and stopped afterwards) and the real `sless dev` process, in what only the local platform
 * shows: a dead-letter exchange that does not exist yet, and a kill -9 of sless while it holds
 * messages losing none of them. Delivery, retries, dead letters and a disabled Trigger are the
 * platform contract's (test/platform/contract.ts), on both platforms.
 */
import { rm } from 'node:fs/promises';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TriggerStatus } from '../../src/core/resources.js';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { pollUntil } from '../helpers/poll-until.js';
import { drainQueue, type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { SlessProcess } from '../helpers/sless-process.js';

const API = '/v1/namespaces/default';

/** The message body says how to answer: bad (422), or slow-fail (500 after `ms`). */
const WORKER = nodeHandler(`
  const attempt = Number(event.headers['x-sless-attempt']);
  const { mode, ms } = event.body;
  if (mode === 'slow-fail') await new Promise((resolve) => setTimeout(resolve, ms));
  if (mode === 'slow-fail') return { statusCode: 500, body: { attempt } };
  if (mode === 'bad') return { statusCode: 422, body: { attempt } };
  return { statusCode: 200, body: { attempt } };
`);

describe('amqp Triggers against a real RabbitMQ', { timeout: 6 * 60_000 }, () => {
  let broker: RabbitMq | undefined;
  let repo: TestRepo;
  let stateDir: string;
  let port: number;
  let sless: SlessProcess | undefined;
  let connection: ChannelModel | undefined;
  let channel: Channel;

  const start = async () => {
    sless = await SlessProcess.start({ repo: repo.dir, stateDir, port, env: { SLESS_OUTBOUND_ALLOW: '' } });
    return sless;
  };
  const call = (path: string, init?: RequestInit) => {
    if (!sless) throw new Error('sless is not running');
    return sless.call(path, init);
  };
  const json = (body: unknown, method = 'POST'): RequestInit => ({
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const status = async (name: string): Promise<TriggerStatus> =>
    ((await (await call(`${API}/triggers/${name}`)).json()) as { status?: TriggerStatus }).status ?? {};
  const applyTrigger = async (name: string, spec: Record<string, unknown>) => {
    const response = await call(
      `${API}/triggers`,
      json({ name, spec: { type: 'amqp', function: 'worker', secretRef: { name: 'rabbit' }, ...spec } }),
    );
    expect([200, 201]).toContain(response.status);
  };
  const consuming = (name: string) =>
    pollUntil(
      `trigger ${name} consumes`,
      async () => {
        const s = await status(name);
        return s.consumer === 'consuming' ? s : undefined;
      },
      60_000,
      50,
    );
  const publish = (queue: string, body: object) =>
    channel.sendToQueue(queue, Buffer.from(JSON.stringify(body)), {
      contentType: 'application/json',
      persistent: true,
    });
  const drain = (queue: string) => drainQueue(channel, queue);
  const depth = async (queue: string) => (await channel.checkQueue(queue)).messageCount;

  beforeAll(async () => {
    [broker, repo, stateDir, port] = await Promise.all([
      startRabbitMq(),
      TestRepo.create({
        'worker/function.yaml': functionManifest('worker', { timeoutSec: 10 }),
        'worker/handler.js': WORKER,
      }),
      tempDir('amqp-state'),
      freePort(),
    ]);
    connection = await amqp.connect(broker.url);
    channel = await connection.createChannel();
    await channel.assertExchange('dead', 'fanout', { durable: true });
    await channel.assertQueue('dead-letters', { durable: true });
    await channel.bindQueue('dead-letters', 'dead', '');
    await start();
    await sless?.settled();
    const secret = await call(`${API}/secrets/rabbit`, json({ stringData: { url: broker.url } }, 'PUT'));
    expect([200, 201]).toContain(secret.status);
  });

  afterEach(({ task }) => {
    if (task.result?.state === 'fail' && sless)
      process.stderr.write(`--- last log lines of sless dev ---\n${sless.tail()}\n`);
  });

  afterAll(async () => {
    await sless?.stop('SIGKILL');
    await connection?.close().catch(() => undefined);
    await broker?.stop();
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('a deadLetterExchange that does not exist loses nothing: the consumer reconnects until it does', async () => {
    await applyTrigger('misrouted', {
      queue: 'misrouted',
      maxAttempts: 1,
      deadLetterExchange: 'not-yet',
    });
    await consuming('misrouted');
    publish('misrouted', { mode: 'bad', n: 'misrouted' });
    // The broker closes the channel on the dead letter: the message goes back to its queue, and the
    // consumer fails, says why and connects again (and again, with backoff).
    const failed = await pollUntil(
      'the consumer reports the missing exchange',
      async () => {
        const s = await status('misrouted');
        return /not-yet/.test(s.lastError ?? '') ? s : undefined;
      },
      30_000,
      50,
    );
    expect(failed.acknowledged).toBe(0);
    await channel.assertExchange('not-yet', 'fanout', { durable: true });
    await channel.bindQueue('dead-letters', 'not-yet', '');
    const dead = await pollUntil(
      'the message reached the exchange once it existed',
      async () => {
        const got = await drain('dead-letters');
        return got.length > 0 ? got : undefined;
      },
      60_000,
      100,
    );
    expect(dead.map((m) => JSON.parse(m.content.toString()).n)).toEqual(['misrouted']);
    await consuming('misrouted');
    expect(await depth('misrouted')).toBe(0);
    expect(await drain('dead-letters')).toHaveLength(0);
  });

  it('a kill -9 of sless while it holds messages loses none: they are delivered after the restart', async () => {
    await applyTrigger('crash', {
      queue: 'crash',
      prefetch: 10,
      maxAttempts: 1,
      deadLetterExchange: 'dead',
    });
    await consuming('crash');
    for (let n = 0; n < 5; n++) publish('crash', { mode: 'slow-fail', ms: 3000, n });
    // All five are out to sless (none ready in the queue) and none is settled yet.
    await pollUntil('sless holds all five', async () => (await depth('crash')) === 0, 30_000, 20);
    expect((await drain('dead-letters')).map((m) => m.content.toString())).toEqual([]);
    await sless?.stop('SIGKILL');
    // The broker takes back what the dead connection held.
    await pollUntil('the broker requeued them', async () => (await depth('crash')) === 5, 30_000, 50);
    await start();
    const dead = await pollUntil(
      'all five dead-lettered after the restart',
      async () => {
        const got = await drain('dead-letters');
        return got.length > 0 ? got : undefined;
      },
      90_000,
      100,
    ).then(async (first) => {
      const all = [...first];
      await pollUntil(
        'the rest arrived',
        async () => {
          all.push(...(await drain('dead-letters')));
          return all.length >= 5;
        },
        90_000,
        100,
      );
      return all;
    });
    const ns = dead.map((m) => JSON.parse(m.content.toString()).n as number).sort();
    expect(ns).toEqual([0, 1, 2, 3, 4]);
    expect(await depth('crash')).toBe(0);
  });
});
