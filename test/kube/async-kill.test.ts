/**
 * A thousand asynchronous invocations on kube across a SIGKILL of the leading controller process:
 * two real controller processes (test/kube/controller-entry.mjs) against the real kube-apiserver +
 * etcd and a real RabbitMQ whose stream journals the invocations. The function fails 30% of its
 * attempts (seeded, printed), the leader is killed with deliveries in flight, the follower takes over.
 * Every id a 202 returned ends exactly once, succeeded or dead-lettered; what the function saw more
 * than once is what at-least-once allows and no more.
 *
 * The kubelet is played (pods are ready at once) and the functions' pods are one local server.
 */
import { createHash, randomInt } from 'node:crypto';
import { createServer } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { InvocationAttempt, InvocationState } from '../../src/core/invocations.js';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  type ControllerProcess,
  FAST_LEASE,
  printTails,
  readyz,
  startAgainst,
} from './controller-process.js';
import { deployFromGit, eventually, type KubeEnv, kubeEnv, playHealthyKubelet } from './harness.js';

const COUNT = 1000;
const CLIENTS = 8;
const MAX_ATTEMPTS = 3;
const CONCURRENCY = 16;
const SEED = Number(process.env.SLESS_TEST_SEED ?? randomInt(2 ** 31));

/** Whether the function fails this attempt of this invocation: 30%, fixed by the seed. */
function fails(index: number, attempt: number): boolean {
  const digest = createHash('sha256').update(`${SEED}:${index}:${attempt}`).digest();
  return digest.readUInt32BE(0) / 2 ** 32 < 0.3;
}

interface View {
  id: string;
  state: InvocationState;
  attempts: InvocationAttempt[];
  result?: { status: number; body: string };
}

interface Seen {
  index: number;
  attempts: number[];
  /** 2xx answers the function gave. */
  succeeded: number;
}

describe('1,000 async invocations on kube across a SIGKILL of the leader', { timeout: 5 * 60_000 }, () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let broker: RabbitMq;
  let stopKubelet: (() => void) | undefined;
  const processes: ControllerProcess[] = [];
  const seen = new Map<string, Seen>();
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = String(req.headers['x-sless-invocation-id'] ?? '');
      const attempt = Number(req.headers['x-sless-attempt'] ?? 0);
      const { index = -1 } = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { index?: number };
      const entry = seen.get(id) ?? { index, attempts: [], succeeded: 0 };
      seen.set(id, entry);
      entry.attempts.push(attempt);
      const status = fails(index, attempt) ? 500 : 200;
      if (status === 200) entry.succeeded++;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, index, attempt }));
    });
  });

  const controller = (identity: string) =>
    startAgainst(env, upstream, processes, identity, {
      ...FAST_LEASE,
      SLESS_LEASE_NAME: 'sless-async-kill',
      SLESS_ASYNC_AMQP_URL: broker.url,
      SLESS_ASYNC_STREAM: `sless.invocations.${env.ns}`,
    });
  const api = (p: ControllerProcess, path: string) => fetch(`${p.url}/v1/namespaces/${env.ns}${path}`);
  const count = async (p: ControllerProcess, state: InvocationState) => {
    const response = await api(p, `/invocations?state=${state}&limit=1`);
    return ((await response.json()) as { items: View[] }).items.length;
  };

  beforeAll(async () => {
    process.stdout.write(`seed ${SEED} (SLESS_TEST_SEED=${SEED} repeats the function's answers)\n`);
    env = await kubeEnv('kasynckill');
    broker = await startRabbitMq();
    repo = await startRemoteRepo({
      'worker/function.yaml': functionManifest('worker', {
        async: { maxAttempts: MAX_ATTEMPTS, backoffMs: 20, concurrency: CONCURRENCY },
      }),
      'worker/handler.js': nodeHandler(`return 'played by the local server';`),
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    stopKubelet = playHealthyKubelet(env.http, env.ns);
  });

  afterEach((context) => {
    if (context.task.result?.state !== 'fail') return;
    printTails(processes);
  });

  afterAll(async () => {
    stopKubelet?.();
    for (const p of processes) await p.dispose();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
    await repo?.close();
    await broker?.stop();
    await env?.close();
  });

  it('every id a 202 returned ends once, succeeded or dead-lettered; duplicates only where the kill cut an attempt', async () => {
    const a = await controller('replica-a');
    await a.leading();
    const b = await controller('replica-b');
    expect(await b.ready()).toMatchObject({ holder: 'replica-a', isLeader: false });
    await deployFromGit(env, repo.url, 'worker', await git(repo.work.dir, 'rev-parse', 'HEAD'), 60_000);
    // Both replicas serve the function before the run: a 503 later can only be the failover.
    for (const p of [a, b])
      await eventually('the function routed', async () => {
        const r = await fetch(`${p.url}/fn/${env.ns}/worker/warm`, {
          method: 'POST',
          body: JSON.stringify({ index: -1 }),
        });
        await r.text();
        return r.status < 502;
      });

    let alive = [a, b];
    let posts = 0;
    let cutOff = 0;
    const ids: string[] = [];
    const enqueue = async (index: number): Promise<string> => {
      for (;;) {
        const target = alive[posts++ % alive.length] as ControllerProcess;
        const viaPrefer = index % 2 === 0;
        const response = await fetch(
          `${target.url}/${viaPrefer ? 'fn' : 'fn-async'}/${env.ns}/worker/flaky`,
          {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              ...(viaPrefer ? { prefer: 'respond-async' } : {}),
            },
            body: JSON.stringify({ index }),
          },
        ).catch(() => undefined);
        if (response?.status === 202) {
          const { id } = (await response.json()) as { id: string };
          return id;
        }
        // The killed replica dropped it, or the follower's hand-off to it (a 502): its record may
        // exist, the 202 never came. Posted again.
        if (!response || response.status === 502) cutOff++;
        else if (response.status !== 503 && response.status !== 429)
          throw new Error(`enqueue ${index}: ${response.status} ${await response.text()}`);
        else await response.text();
        await new Promise((r) => setTimeout(r, 50));
      }
    };

    let killed: Promise<void> | undefined;
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < COUNT) {
          const index = next++;
          ids.push(await enqueue(index));
          if (ids.length === 400 && !killed)
            killed = (async () => {
              // Deliveries are under way when it dies, not only accepts.
              await eventually('attempts running', async () => (await count(a, 'running')) > 0, 30_000);
              a.kill('SIGKILL');
              await a.exited;
              alive = [b];
              process.stdout.write(`SIGKILL of replica-a after ${ids.length} accepted\n`);
              await b.leading();
            })();
        }
      }),
    );
    await killed;
    expect(killed).toBeDefined();
    expect((await readyz(b.url))?.leader).toMatchObject({ holder: 'replica-b', isLeader: true });

    // Every id the 202s returned reaches a terminal state, through the status API: once none is open,
    // each is read once.
    expect(new Set(ids).size).toBe(COUNT);
    await eventually(
      'no invocation open',
      async () => (await count(b, 'queued')) + (await count(b, 'running')) === 0,
      150_000,
    );
    const views = new Map<string, View>();
    let cursor = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (cursor < ids.length) {
          const id = ids[cursor++] as string;
          const response = await api(b, `/invocations/${id}`);
          expect(response.status, `invocation ${id} was lost`).toBe(200);
          const view = (await response.json()) as View;
          expect(['succeeded', 'dead-lettered'], JSON.stringify(view)).toContain(view.state);
          views.set(id, view);
        }
      }),
    );
    expect(views.size).toBe(COUNT);

    let succeeded = 0;
    let dead = 0;
    let interruptedAttempts = 0;
    let duplicates = 0;
    let attemptsSeen = 0;
    for (const id of ids) {
      const v = views.get(id) as View;
      const successes = v.attempts.filter((x) => x.status !== undefined && x.status < 300);
      const counted = v.attempts.filter((x) => !x.interrupted);
      const interrupted = v.attempts.length - counted.length;
      interruptedAttempts += interrupted;
      const fn = seen.get(id);
      attemptsSeen += fn?.attempts.length ?? 0;
      // Acknowledged once: one recorded success for a success, none for a dead letter.
      if (v.state === 'succeeded') {
        succeeded++;
        expect(successes, JSON.stringify(v)).toHaveLength(1);
        expect(counted.at(-1)?.status).toBe(200);
        expect(JSON.parse(v.result?.body ?? '{}').id).toBe(id);
      } else {
        dead++;
        expect(successes, JSON.stringify(v)).toHaveLength(0);
        expect(counted).toHaveLength(MAX_ATTEMPTS);
        expect(counted.every((x) => x.status === 500)).toBe(true);
      }
      // At least once: the function saw one more 2xx than recorded only where the kill cut an attempt
      // between its answer and the record of it (the attempt is recorded interrupted and sent again).
      const extra = (fn?.succeeded ?? 0) - successes.length;
      if (interrupted === 0) {
        expect(extra, JSON.stringify({ v, fn })).toBe(0);
        // Untouched by the kill, the outcome is the seed's: attempts 1, 2, 3 as the function decided.
        const expected = [1, 2, 3].findIndex((n) => !fails(fn?.index ?? -1, n));
        expect(v.state).toBe(expected === -1 ? 'dead-lettered' : 'succeeded');
        expect(v.attempts).toHaveLength(expected === -1 ? MAX_ATTEMPTS : expected + 1);
        expect(fn?.attempts).toEqual(v.attempts.map((x) => x.number));
      } else {
        expect(extra).toBeGreaterThanOrEqual(0);
        expect(extra).toBeLessThanOrEqual(interrupted);
        duplicates += extra;
      }
    }
    // Records beyond the accepted ones: only from posts the kill cut off before their 202.
    const unaccepted = [...seen.keys()].filter((id) => id !== '' && !views.has(id));
    expect(unaccepted.length).toBeLessThanOrEqual(cutOff);
    // Attempts in flight at the kill are those recorded interrupted, at most the leader's concurrency.
    expect(interruptedAttempts).toBeGreaterThan(0);
    expect(interruptedAttempts).toBeLessThanOrEqual(CONCURRENCY);
    expect(duplicates).toBeLessThanOrEqual(interruptedAttempts);
    expect(dead).toBeGreaterThan(0);
    expect(succeeded + dead).toBe(COUNT);
    process.stdout.write(
      `seed ${SEED}: ${succeeded} succeeded, ${dead} dead-lettered, ${attemptsSeen} attempts seen by the ` +
        `function, ${interruptedAttempts} in flight at the kill, ${duplicates} successes seen twice, ` +
        `${cutOff} posts cut off (${unaccepted.length} of them stored)\n`,
    );

    // Nothing else happens after: a sentinel invocation ends, and the function saw no more attempts of
    // the thousand meanwhile.
    const before = attemptsSeen;
    const sentinel = await enqueue(COUNT);
    await eventually(
      'the sentinel ended',
      async () => {
        const v = (await (await api(b, `/invocations/${sentinel}`)).json()) as View;
        return v.state === 'succeeded' || v.state === 'dead-lettered';
      },
      60_000,
    );
    expect(ids.reduce((sum, id) => sum + (seen.get(id)?.attempts.length ?? 0), 0)).toBe(before);
  });
});
