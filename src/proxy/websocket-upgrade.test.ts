/**
 * The WebSocket tunnel goes where a request would: to the endpoint the route's picker chooses (a kube
 * route's serving-revision pods), not to the route's origin (the Service, which may still send a new
 * connection to a replaced pod); the endpoint counts the socket as in flight until it closes. And it
 * passes the function's concurrency limit as a request does, through the same gates as the thread's
 * requests: an open socket holds a slot, the next upgrade or request waits behind it, the queue's
 * overflow is a 503 at once, and a wait as long as the function's timeout is a 503 too. Real
 * servers on loopback: a front that hands requests and upgrades to the proxies, and `ws` servers
 * playing the Service and the pod.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { RouteResolver, RouteState } from '../core/interfaces.js';
import { FunctionProxy } from './function-proxy.js';
import { LeastInFlight } from './least-in-flight.js';
import { UpgradeProxy } from './websocket-upgrade.js';

/** A server that accepts every WebSocket, greets it with `name`, and echoes; counts upgrades asked. */
async function greeter(
  name: string,
): Promise<{ server: Server; wss: WebSocketServer; origin: string; upgrades: () => number }> {
  const wss = new WebSocketServer({ noServer: true });
  let upgrades = 0;
  const server = createServer((_req, res) => res.end(name));
  server.on('upgrade', (req, socket, head) => {
    upgrades++;
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.send(`hello from ${name}`);
      ws.on('message', (data) => ws.send(String(data)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, wss, origin: `http://127.0.0.1:${port}`, upgrades: () => upgrades };
}

describe('UpgradeProxy and a route with endpoints', () => {
  let service: Awaited<ReturnType<typeof greeter>>;
  let pod: Awaited<ReturnType<typeof greeter>>;
  let front: Server;
  let frontUrl: string;
  let picker: LeastInFlight;
  let released = 0;
  /** Upgraded sockets leave the front's connection tracking: they are ended here after a failure. */
  const tunnels = new Set<import('node:stream').Duplex>();

  beforeAll(async () => {
    service = await greeter('service');
    pod = await greeter('pod');
    picker = new LeastInFlight([pod.origin]);
    const route: RouteState = {
      state: 'ready',
      origin: service.origin,
      endpoints: picker,
      timeoutSec: 5,
      release: () => {
        released++;
      },
    };
    const routes: RouteResolver = { resolve: async () => route };
    const proxy = new UpgradeProxy({ routes });
    front = createServer((_req, res) => res.end());
    front.on('upgrade', (req, socket, head) => {
      tunnels.add(socket);
      proxy.handle(req, socket, head);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    frontUrl = `ws://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    for (const socket of tunnels) socket.destroy();
    for (const ws of [...(service?.wss.clients ?? []), ...(pod?.wss.clients ?? [])]) ws.terminate();
    for (const server of [front, service?.server, pod?.server]) {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    }
  });

  it('tunnels to the picked endpoint, counted in flight there until the socket closes', async () => {
    const ws = new WebSocket(`${frontUrl}/fn/team/chat/socket`);
    const messages: string[] = [];
    let wake: (() => void) | undefined;
    ws.addEventListener('message', (event) => {
      messages.push(String(event.data));
      wake?.();
    });
    const until = async (count: number) => {
      while (messages.length < count) await new Promise<void>((resolve) => (wake = resolve));
    };
    await until(1);
    expect(messages).toEqual(['hello from pod']);
    expect(picker.inFlightOf(pod.origin)).toBe(1);
    ws.send('ping');
    await until(2);
    expect(messages).toEqual(['hello from pod', 'ping']);
    const closed = new Promise((resolve) => ws.addEventListener('close', resolve));
    ws.close();
    await closed;
    // The proxy sees the end a moment after the client does.
    while (released === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(picker.inFlightOf(pod.origin)).toBe(0);
    expect(released).toBe(1);
    // The route's own origin was never asked.
    expect(service.upgrades()).toBe(0);
    expect(pod.upgrades()).toBe(1);
  });
});

/** An upgrade as a raw client sends it: resolves with the 101's socket, or with the refusal. */
function upgrade(
  url: string,
  signal?: AbortSignal,
): Promise<{ status: number; socket?: Duplex; body: string; retryAfter?: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      ...(signal ? { signal } : {}),
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    });
    req.on('upgrade', (res, socket) => resolve({ status: res.statusCode ?? 0, socket, body: '' }));
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body, retryAfter: res.headers['retry-after'] as string }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

const settledWithin = <T>(promise: Promise<T>, ms: number): Promise<boolean> =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('UpgradeProxy and a function with a concurrency limit', () => {
  let pod: Awaited<ReturnType<typeof greeter>>;
  let front: Server;
  let base: string;
  let requests: FunctionProxy;
  let released = 0;
  const tunnels = new Set<Duplex>();
  const opened = new Set<Duplex>();

  beforeAll(async () => {
    pod = await greeter('pod');
    // One in flight, one waiting; a second of the function's timeout bounds the wait.
    const route: RouteState = {
      state: 'ready',
      origin: pod.origin,
      timeoutSec: 1,
      admission: { limit: 1, queue: 1 },
      release: () => {
        released++;
      },
    };
    const routes: RouteResolver = { resolve: async () => route };
    requests = new FunctionProxy({ routes });
    const upgrades = new UpgradeProxy({ routes, admissions: requests.admissions });
    front = createServer((req, res) => void requests.handle(req, res));
    front.on('upgrade', (req, socket, head) => {
      tunnels.add(socket);
      upgrades.handle(req, socket, head);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    for (const socket of [...tunnels, ...opened]) socket.destroy();
    for (const ws of pod?.wss.clients ?? []) ws.terminate();
    await requests?.close();
    for (const server of [front, pod?.server]) {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    }
  });

  const closeAndWait = async (socket: Duplex | undefined) => {
    const before = released;
    socket?.destroy();
    while (released === before) await new Promise((resolve) => setTimeout(resolve, 10));
  };

  it('holds a slot while a socket is open: the next upgrade waits for it, the one after is a 503 at once', async () => {
    const first = await upgrade(`${base}/fn/team/chat/`);
    expect(first.status).toBe(101);
    if (first.socket) opened.add(first.socket);
    expect(requests.admissions.inFlight('team', 'chat')).toBe(1);
    const asked = pod.upgrades();
    // Queued: the function is not asked while the first socket is open.
    const second = upgrade(`${base}/fn/team/chat/`);
    expect(await settledWithin(second, 300)).toBe(false);
    expect(pod.upgrades()).toBe(asked);
    // The queue (1) is full: turned away without asking the function, as a request would be.
    const third = await upgrade(`${base}/fn/team/chat/`);
    expect(third.status).toBe(503);
    expect(third.retryAfter).toBe('1');
    expect(JSON.parse(third.body).error).toContain('function team/chat is at its concurrency limit');
    expect(pod.upgrades()).toBe(asked);
    // The first closes: the waiting one gets its slot.
    await closeAndWait(first.socket);
    const admitted = await second;
    expect(admitted.status).toBe(101);
    if (admitted.socket) opened.add(admitted.socket);
    expect(pod.upgrades()).toBe(asked + 1);
    await closeAndWait(admitted.socket);
    expect(requests.admissions.inFlight('team', 'chat')).toBe(0);
  });

  it("counts an open socket against the function's requests: one waits, then has its 503 after the timeout", async () => {
    const socket = await upgrade(`${base}/fn/team/chat/`);
    expect(socket.status).toBe(101);
    if (socket.socket) opened.add(socket.socket);
    const started = Date.now();
    const res = await fetch(`${base}/fn/team/chat/`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: string }).error).toContain('had no free instance within 1s');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    // Once the socket closes, a request is admitted at once.
    await closeAndWait(socket.socket);
    const after = await fetch(`${base}/fn/team/chat/`);
    expect(after.status).toBe(200);
    expect(await after.text()).toBe('pod');
  });

  it('takes an upgrade whose client went away out of the queue, and turns away one that waited too long', async () => {
    const holder = await upgrade(`${base}/fn/team/chat/`);
    expect(holder.status).toBe(101);
    if (holder.socket) opened.add(holder.socket);
    const asked = pod.upgrades();
    const leaving = new AbortController();
    const gone = upgrade(`${base}/fn/team/chat/`, leaving.signal).catch((error: Error) => error.name);
    await new Promise((resolve) => setTimeout(resolve, 100));
    leaving.abort();
    expect(await gone).toBe('AbortError');
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Had the one that left kept its place, the queue (1) would be full and this a 503 at once.
    const started = Date.now();
    const waited = await upgrade(`${base}/fn/team/chat/`);
    expect(waited.status).toBe(503);
    expect(JSON.parse(waited.body).error).toContain('had no free instance within 1s');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    await closeAndWait(holder.socket);
    // Neither reached the function, and nothing is left in flight or waiting.
    expect(pod.upgrades()).toBe(asked);
    expect(requests.admissions.inFlight('team', 'chat')).toBe(0);
    expect(requests.queueDepths()).toEqual([]);
  });
});
