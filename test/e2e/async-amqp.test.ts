/**
 * Asynchronous invocations and an amqp Trigger on a real node, against a real RabbitMQ (Debian's
 * rabbitmq-server, started for the run): the function runs as a pod, and each call it gets is told to
 * a recorder on the host (the pod reaches the node's bridge address), so what the pods saw is known
 * call by call. Asynchronous invocations, journaled in a RabbitMQ stream, answer 202 at once and end
 * succeeded with the pod's own answer, a function failing twice is tried three times, and one always
 * failing is dead-lettered after its attempts. A queue consumed by the Trigger delivers each message
 * to a pod once and acknowledges it; one failing twice is tried three times, and one always failing
 * ends on the dead-letter exchange; "nothing else happened" is read after a sentinel (prefetch 1: in
 * order). The broker runs beside the controller, on the host; the pods never reach it.
 */
import { createServer } from 'node:http';
import amqp, { type Channel, type ChannelModel, type GetMessage } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InvocationAttempt, InvocationState } from '../../src/core/invocations.js';
import { freePort } from '../../src/platform/local/ports.js';
import { GATEWAY_IP } from '../cluster/node.ts';
import { functionManifest } from '../helpers/git.js';
import { amqpTriggerYaml, type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { eventually, putSecret } from '../kube/harness.js';
import { type E2eEnv, servedBody, startE2e } from './harness.ts';

const BUILD_MS = 10 * 60_000;
const QUEUE = 'jobs';

/** What the pod was asked, as it told the recorder. */
interface Call {
  n: string;
  path: string;
  attempt: number;
  invocation: string | null;
  trigger: string | null;
  pod: string;
}

/** The pod tells the recorder of every call first, then answers as the path or the body says. */
const HANDLER = `const os = require('node:os');
exports.handle = async (event) => {
  const attempt = Number(event.headers['x-sless-attempt'] ?? 0);
  let body = event.body ?? {};
  if (typeof body === 'string') try { body = JSON.parse(body); } catch { body = {}; }
  await fetch(process.env.RECORD_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      n: String(body.n ?? ''),
      path: event.path,
      attempt,
      invocation: event.headers['x-sless-invocation-id'] ?? null,
      trigger: event.headers['x-sless-trigger'] ?? null,
      pod: os.hostname(),
    }),
  });
  if ((event.path === '/twice' || body.mode === 'fail-until') && attempt < 3) return { statusCode: 503, body: 'not yet' };
  if (event.path === '/always' || body.mode === 'fail') return { statusCode: 500, body: 'never' };
  return { n: body.n ?? null, attempt, pod: os.hostname() };
};
`;

interface View {
  id: string;
  state: InvocationState;
  attempts: InvocationAttempt[];
  result?: { status: number; body: string };
}

describe('e2e on a real node: async invocations and an amqp Trigger against RabbitMQ', () => {
  let env: E2eEnv;
  let broker: RabbitMq;
  let connection: ChannelModel;
  let channel: Channel;
  const calls: Call[] = [];
  const recordPort = freePort();

  const api = (path: string, init?: RequestInit) =>
    fetch(`${env.system.url}/v1/namespaces/${env.ns}${path}`, init);
  const enqueue = async (path: string, n: number): Promise<string> => {
    const response = await fetch(`${env.system.url}/fn-async/${env.ns}/worker${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ n: `a${n}` }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };
  const ended = (id: string) =>
    eventually(
      `invocation ${id} ended`,
      async () => {
        const response = await api(`/invocations/${id}`);
        const view = (await response.json()) as View;
        return ['succeeded', 'failed', 'dead-lettered'].includes(view.state) ? view : undefined;
      },
      120_000,
    );
  const publish = (n: string, body: Record<string, unknown> = {}, queue = QUEUE) =>
    channel.sendToQueue(queue, Buffer.from(JSON.stringify({ n, ...body })), {
      contentType: 'application/json',
      persistent: true,
    });
  const callsOf = (n: string) => calls.filter((c) => c.n === n);

  beforeAll(async () => {
    broker = await startRabbitMq();
    connection = await amqp.connect(broker.url);
    channel = await connection.createChannel();
    await channel.assertQueue(QUEUE, { durable: true });
    await channel.assertExchange('dead', 'fanout', { durable: true });
    await channel.assertQueue('dead-letters', { durable: true });
    await channel.bindQueue('dead-letters', 'dead', '');
    const port = await recordPort;
    env = await startE2e(
      'e2e-async',
      {
        'worker/function.yaml': functionManifest('worker', {
          async: { maxAttempts: 3, backoffMs: 20, concurrency: 8 },
          env: { RECORD_URL: `http://${GATEWAY_IP}:${port}/` },
        }),
        'worker/handler.js': HANDLER,
        'worker/jobs.yaml': amqpTriggerYaml('jobs', {
          queue: QUEUE,
          maxAttempts: 3,
          prefetch: 1,
          deadLetterExchange: 'dead',
        }),
      },
      {
        env: { SLESS_ASYNC_AMQP_URL: broker.url },
        withNode: async (node) => {
          // On the node's bridge address, which the pods reach and nothing beyond the machine does.
          const server = createServer((req, res) => {
            const chunks: Buffer[] = [];
            req.on('data', (chunk: Buffer) => chunks.push(chunk));
            req.on('end', () => {
              calls.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Call);
              res.end('{}');
            });
          });
          await new Promise<void>((resolve, reject) => {
            server.once('error', reject);
            server.listen(port, node.gatewayIp, () => resolve());
          });
          return {
            env: {},
            close: () =>
              new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
              }),
          };
        },
      },
    );
    // The Trigger's URL, as an operator stores it: a Secret of its namespace.
    await putSecret(env.http, env.ns, 'rabbit', { url: broker.url });
    await servedBody(env, 'worker', '"attempt":', BUILD_MS, '/');
  }, 60 * 60_000);

  afterAll(async () => {
    await connection?.close().catch(() => undefined);
    await env?.close();
    await broker?.stop();
  }, 300_000);

  it('async invocations answer 202, run on the pod, retry a function failing twice and dead-letter one always failing', async () => {
    const ok = await Promise.all(Array.from({ length: 20 }, (_, i) => enqueue('/ok', i)));
    const twice = await enqueue('/twice', 100);
    const always = await enqueue('/always', 101);
    const views = await Promise.all(ok.map(ended));
    for (const view of views) {
      expect(view.state).toBe('succeeded');
      expect(view.attempts.map((a) => a.status)).toEqual([200]);
      const answer = JSON.parse(view.result?.body ?? '{}') as { pod?: string; attempt?: number };
      expect(answer.pod).toMatch(/^worker-/);
      expect(answer.attempt).toBe(1);
    }
    expect((await ended(twice)).attempts.map((a) => a.status)).toEqual([503, 503, 200]);
    const dead = await ended(always);
    expect(dead.state).toBe('dead-lettered');
    expect(dead.attempts.map((a) => a.status)).toEqual([500, 500, 500]);
    // The pods saw each invocation as many times as its attempts say, numbered 1, 2, 3, and no other.
    for (let i = 0; i < 20; i++) expect(callsOf(`a${i}`).map((c) => c.attempt)).toEqual([1]);
    expect(callsOf('a100').map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(callsOf('a101').map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(new Set(calls.filter((c) => c.n.startsWith('a')).map((c) => c.invocation)).size).toBe(22);
  });

  it('the Trigger delivers each message to a pod once and acknowledges it, retries one failing twice and dead-letters one always failing', async () => {
    await eventually(
      'the Trigger consuming its queue',
      async () => (await channel.checkQueue(QUEUE)).consumerCount === 1,
      60_000,
    );
    for (let i = 0; i < 20; i++) publish(`q${i}`);
    publish('q-twice', { mode: 'fail-until' });
    publish('q-dead', { mode: 'fail' });
    publish('q-sentinel');
    await eventually('the sentinel delivered', async () => callsOf('q-sentinel').length > 0, 120_000);
    for (let i = 0; i < 20; i++) expect(callsOf(`q${i}`).map((c) => c.attempt)).toEqual([1]);
    expect(callsOf('q-twice').map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(callsOf('q-dead').map((c) => c.attempt)).toEqual([1, 2, 3]);
    expect(callsOf('q-sentinel').map((c) => c.attempt)).toEqual([1]);
    expect(new Set(calls.filter((c) => c.n.startsWith('q')).map((c) => c.trigger))).toEqual(
      new Set(['jobs']),
    );
    // Acknowledged: nothing left in the queue, and the one that always failed on the dead-letter exchange.
    await eventually(
      'the queue empty',
      async () => (await channel.checkQueue(QUEUE)).messageCount === 0,
      30_000,
    );
    const deadLetters: GetMessage[] = [];
    for (let message = await channel.get('dead-letters', { noAck: true }); message; ) {
      deadLetters.push(message);
      message = await channel.get('dead-letters', { noAck: true });
    }
    expect(deadLetters.map((m) => JSON.parse(m.content.toString('utf8')).n)).toEqual(['q-dead']);
  });
});
