/**
 * The proxy thread against real servers: a function's server on a unix socket, the main thread's
 * handler behind the private socket, clients over TCP. The thread runs the compiled worker in dist/
 * (`npm test` builds it first).
 */
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { clientAddressOf } from '../../proxy/client-address.js';
import { Gateway } from './gateway.js';

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  client?: string;
}

/**
 * A function's server on a unix socket: answers at once, holds `/hold` until told, or on `/crash`
 * runs `beforeCrash` and then drops the connection without an answer, as a process killed under a
 * request does.
 */
async function functionServer(dir: string) {
  const seen: Seen[] = [];
  const held: ServerResponse[] = [];
  let onHeld: (() => void) | undefined;
  const hooks: { beforeCrash?: () => Promise<void> } = {};
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    if (req.url === '/hold') {
      held.push(res);
      onHeld?.();
      return;
    }
    if (req.url === '/crash') {
      void (hooks.beforeCrash?.() ?? Promise.resolve()).then(() => req.socket.destroy());
      return;
    }
    res.end(`fn:${req.url}`);
  });
  const socketPath = join(dir, 'fn.sock');
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    server,
    socketPath,
    seen,
    held,
    hooks,
    nextHeld: () =>
      new Promise<void>((resolve) => {
        onHeld = resolve;
      }),
  };
}

function get(url: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    })
      .on('error', reject)
      .end();
  });
}

describe('Gateway (the proxy thread)', () => {
  let dir: string;
  let fn: Awaited<ReturnType<typeof functionServer>>;
  let gateway: Gateway;
  const mainSaw: Seen[] = [];
  let streaming: ServerResponse | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sless-gateway-test-'));
    fn = await functionServer(dir);
    gateway = await Gateway.start('127.0.0.1', 0);
    gateway.attach((req, res) => {
      mainSaw.push({ url: req.url ?? '', headers: req.headers, client: clientAddressOf(req) });
      if (req.url === '/v1/stream') {
        // A log stream that follows: headers now, lines later.
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.flushHeaders();
        streaming = res;
        return;
      }
      res.end(`main:${req.url}`);
    });
  });

  afterEach(() => {
    mainSaw.length = 0;
    fn.seen.length = 0;
  });

  afterAll(async () => {
    await gateway?.close();
    await new Promise((resolve) => fn?.server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  function publishReady(slot: number): void {
    gateway.publish('default/echo', {
      state: 'ready',
      origin: 'http://localhost',
      socketPath: fn.socketPath,
      timeoutSec: 5,
      activitySlot: slot,
    });
  }

  it('proxies a ready function itself, without the main thread', async () => {
    const slot = gateway.activity.allocate() as number;
    publishReady(slot);
    await gateway.synced();
    expect(await get(`${gateway.url}/fn/default/echo/a?b=1`)).toEqual({ status: 200, text: 'fn:/a?b=1' });
    expect(fn.seen.map((s) => s.url)).toEqual(['/a?b=1']);
    expect(fn.seen[0]?.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(mainSaw).toEqual([]);
    gateway.publish('default/echo', undefined);
    await gateway.synced();
    gateway.activity.free(slot);
  });

  it('relays everything else to the main thread with the Host and the client address', async () => {
    const api = await get(`${gateway.url}/v1/namespaces`);
    const unready = await get(`${gateway.url}/fn/default/echo`);
    expect([api, unready]).toEqual([
      { status: 200, text: 'main:/v1/namespaces' },
      { status: 200, text: 'main:/fn/default/echo' },
    ]);
    expect(mainSaw.map((s) => [s.url, s.client, s.headers.host])).toEqual([
      ['/v1/namespaces', '127.0.0.1', new URL(gateway.url).host],
      ['/fn/default/echo', '127.0.0.1', new URL(gateway.url).host],
    ]);
    expect(mainSaw[0]?.headers).not.toHaveProperty('x-sless-relayed-client-address');
    expect(fn.seen).toEqual([]);
  });

  it('passes on at once the headers the main thread sent before any body', async () => {
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      httpRequest(`${gateway.url}/v1/stream`, { agent: false }, resolve).on('error', reject).end();
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('application/x-ndjson');
    let text = '';
    response.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    const ended = new Promise((resolve) => response.on('end', resolve));
    streaming?.end('{"line":"x"}\n');
    await ended;
    expect(text).toBe('{"line":"x"}\n');
  });

  it('does not let a client claim an address on the relayed path', async () => {
    await new Promise<void>((resolve, reject) => {
      httpRequest(
        `${gateway.url}/v1/x`,
        { agent: false, headers: { 'x-sless-relayed-client-address': '203.0.113.9' } },
        (res) => res.resume().on('end', resolve),
      )
        .on('error', reject)
        .end();
    });
    expect(mainSaw.map((s) => s.client)).toEqual(['127.0.0.1']);
  });

  it('counts its requests on the shared board, where the main thread waits for them to end', async () => {
    const slot = gateway.activity.allocate() as number;
    publishReady(slot);
    await gateway.synced();
    const arrived = fn.nextHeld();
    const pending = get(`${gateway.url}/fn/default/echo/hold`);
    await arrived;
    expect(gateway.activity.inflightOf(slot)).toBe(1);
    const idle = gateway.activity.waitIdle(slot, 10_000);
    fn.held.shift()?.end('released');
    expect(await idle).toBe(true);
    expect(gateway.activity.inflightOf(slot)).toBe(0);
    expect(await pending).toEqual({ status: 200, text: 'released' });
    gateway.publish('default/echo', undefined);
    await gateway.synced();
    gateway.activity.free(slot);
  });

  it('stops proxying a route once synced() resolves after it is withdrawn', async () => {
    const slot = gateway.activity.allocate() as number;
    publishReady(slot);
    await gateway.synced();
    expect((await get(`${gateway.url}/fn/default/echo`)).text).toBe('fn:/');
    gateway.publish('default/echo', undefined);
    await gateway.synced();
    expect((await get(`${gateway.url}/fn/default/echo`)).text).toBe('main:/fn/default/echo');
    gateway.activity.free(slot);
  });

  it('answers an unavailable function itself, as the main thread would', async () => {
    gateway.publish('default/echo', {
      state: 'unavailable',
      status: 503,
      message: 'function default/echo is disabled',
    });
    await gateway.synced();
    const answer = await get(`${gateway.url}/fn/default/echo`);
    expect(answer).toEqual({
      status: 503,
      text: JSON.stringify({ error: 'function default/echo is disabled' }),
    });
    expect(mainSaw).toEqual([]);
    gateway.publish('default/echo', undefined);
    await gateway.synced();
  });

  it('gives a request whose function crashed under it a 502, not the answer for a new request', async () => {
    const slot = gateway.activity.allocate() as number;
    publishReady(slot);
    await gateway.synced();
    // The platform learns of the crash (and publishes it) before the proxy sees the dropped connection.
    fn.hooks.beforeCrash = async () => {
      gateway.publish('default/echo', {
        state: 'unavailable',
        status: 503,
        message: 'function default/echo is restarting after a crash',
      });
      await gateway.synced();
    };
    try {
      const answer = await get(`${gateway.url}/fn/default/echo/crash`);
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.text).error).toMatch(/^function default\/echo is unreachable: /);
      expect(fn.seen.map((s) => s.url)).toEqual(['/crash']);
      expect(mainSaw).toEqual([]);
      expect(gateway.activity.inflightOf(slot)).toBe(0);
    } finally {
      fn.hooks.beforeCrash = undefined;
      gateway.publish('default/echo', undefined);
      await gateway.synced();
      gateway.activity.free(slot);
    }
  });

  it('hands over its proxy counts once', async () => {
    await gateway.takeTallies();
    const slot = gateway.activity.allocate() as number;
    publishReady(slot);
    await gateway.synced();
    await get(`${gateway.url}/fn/default/echo/1`);
    await get(`${gateway.url}/fn/default/echo/2`);
    const tallies = await gateway.takeTallies();
    expect(tallies.map((t) => [t.namespace, t.function, [...t.codes], t.count])).toEqual([
      ['default', 'echo', [[200, 2]], 2],
    ]);
    expect(await gateway.takeTallies()).toEqual([]);
    gateway.publish('default/echo', undefined);
    await gateway.synced();
    gateway.activity.free(slot);
  });

  it('reports a port in use as the listen error', async () => {
    const port = Number(new URL(gateway.url).port);
    await expect(Gateway.start('127.0.0.1', port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});

describe('Gateway.drainClients', () => {
  it('lets a request in flight finish and takes no new connection', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sless-gateway-test-'));
    const fn = await functionServer(dir);
    const gateway = await Gateway.start('127.0.0.1', 0);
    try {
      gateway.attach((_req, res) => res.end('main'));
      const slot = gateway.activity.allocate() as number;
      gateway.publish('default/echo', {
        state: 'ready',
        origin: 'http://localhost',
        socketPath: fn.socketPath,
        timeoutSec: 5,
        activitySlot: slot,
      });
      await gateway.synced();
      const arrived = fn.nextHeld();
      const pending = get(`${gateway.url}/fn/default/echo/hold`);
      await arrived;
      const drained = gateway.drainClients();
      // The port closes at once (refused, or reset if the kernel had queued it); the held request still ends.
      let refused: unknown;
      for (let attempt = 0; attempt < 200 && !refused; attempt++)
        refused = await get(`${gateway.url}/x`).then(
          () => new Promise((resolve) => setTimeout(() => resolve(undefined), 10)),
          (error: unknown) => error,
        );
      expect(['ECONNREFUSED', 'ECONNRESET']).toContain((refused as { code?: string }).code);
      fn.held.shift()?.end('finished');
      expect(await pending).toEqual({ status: 200, text: 'finished' });
      await drained;
    } finally {
      await gateway.close();
      await new Promise((resolve) => fn.server.close(resolve));
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Gateway when its thread dies', () => {
  it('reports the failure once, and nothing that waits on the thread hangs', async () => {
    const gateway = await Gateway.start('127.0.0.1', 0);
    try {
      gateway.attach((_req, res) => res.end('main'));
      const failures: string[] = [];
      gateway.report({ upstreamError: () => undefined, failed: (error) => failures.push(error.message) });
      expect((await get(`${gateway.url}/v1/x`)).text).toBe('main');
      // As if the thread crashed: sless cannot reach it from outside, so the test ends it directly.
      const worker = Reflect.get(gateway, 'worker') as Worker;
      const exited = once(worker, 'exit');
      await worker.terminate();
      await exited;
      expect(failures).toEqual(['the gateway thread exited with code 1']);
      // Route changes, their acknowledgement and the tallies answer at once instead of waiting for ever.
      gateway.publish('default/echo', { state: 'unavailable', status: 503, message: 'x' });
      await gateway.synced();
      expect(await gateway.takeTallies()).toEqual([]);
      // The public port went with the thread.
      await expect(get(`${gateway.url}/v1/x`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      await gateway.close();
    }
  });
});
