/**
 * WebSockets through /fn/, from the proxy thread and from the main thread, against real Node
 * runtime processes whose handlers accept the upgrade with `ws`: an echo on the function's
 * sub-path, a refusal passed on as the function gave it, a function woken from zero by an upgrade,
 * an open connection counting as activity for scale to zero, and as a request in flight against
 * the function's concurrency limit. And an echo in the Python and Go runtimes, accepted with
 * `websockets` and `github.com/coder/websocket`, which their builds install.
 */
import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, TestRepo } from '../helpers/git.js';
import {
  eventually,
  startStreamRuntimes,
  startTestSystem,
  type TestSystem,
} from '../helpers/local-system.js';
import { STREAM_RUNTIMES } from '../helpers/stream-functions.js';
import { upgradeStatus } from '../helpers/upgrade-status.js';
import { vendoredWs } from '../helpers/vendored-ws.js';

const ECHO = `
const { WebSocketServer } = require('ws');
const wss = new WebSocketServer({ noServer: true });
exports.handle = async () => ({ ok: true });
exports.upgrade = (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.send(JSON.stringify({ url: req.url, forwardedPrefix: req.headers['x-forwarded-prefix'] }));
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
};
`;

const NO_UPGRADE = 'exports.handle = async () => ({ ok: true });\n';

interface Socket {
  ws: WebSocket;
  /** Messages not yet taken, and takers waiting for the next one. */
  inbox: Array<string | Buffer>;
  waiting: Array<(message: string | Buffer) => void>;
}

/** Keeps every message `ws` receives, in order, for next() to take. */
function track(ws: WebSocket): Socket {
  ws.binaryType = 'arraybuffer';
  const socket: Socket = { ws, inbox: [], waiting: [] };
  ws.addEventListener('message', (event) => {
    const data = typeof event.data === 'string' ? event.data : Buffer.from(event.data as ArrayBuffer);
    const taker = socket.waiting.shift();
    if (taker) taker(data);
    else socket.inbox.push(data);
  });
  return socket;
}

/** Opens a WebSocket (undici's client) and resolves with it and its first message. */
function connect(url: string): Promise<{ socket: Socket; first: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const socket = track(ws);
    let opened = false;
    ws.addEventListener('open', () => {
      opened = true;
      void next(socket).then((first) => resolve({ socket, first: String(first) }));
    });
    ws.addEventListener('error', () => {
      if (!opened) reject(new Error('the upgrade failed'));
    });
  });
}

function next(socket: Socket): Promise<string | Buffer> {
  const queued = socket.inbox.shift();
  if (queued !== undefined) return Promise.resolve(queued);
  return new Promise((resolve) => socket.waiting.push(resolve));
}

function reply(socket: Socket, message: string | Buffer): Promise<string | Buffer> {
  socket.ws.send(message);
  return next(socket);
}

/** A binary message comes back byte for byte, then `count` text messages sent at once come back in order. */
async function expectEchoes(socket: Socket, count: number): Promise<void> {
  const bytes = Buffer.from([0, 255, 1, 254]);
  expect(Buffer.compare((await reply(socket, bytes)) as Buffer, bytes)).toBe(0);
  const many = Array.from({ length: count }, (_, i) => `m${i}`);
  for (const m of many) socket.ws.send(m);
  const received: Array<string | Buffer> = [];
  for (const _ of many) received.push(await next(socket));
  expect(received).toEqual(many);
}

async function close(socket: Socket): Promise<void> {
  if (socket.ws.readyState === WebSocket.CLOSED) return;
  const done = new Promise<void>((resolve) => socket.ws.addEventListener('close', () => resolve()));
  socket.ws.close();
  await done;
}

describe.each([
  ['the proxy thread', true],
  ['the main thread', false],
])('WebSockets through /fn/ from %s', (_how, proxyThread) => {
  let repo: TestRepo;
  let system: TestSystem;
  const wsUrl = (path: string) => `${system.url.replace(/^http/, 'ws')}/fn/default/${path}`;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'ws-echo/function.yaml': functionManifest('ws-echo'),
      'ws-echo/handler.js': ECHO,
      ...vendoredWs('ws-echo'),
      'ws-lazy/function.yaml': functionManifest('ws-lazy', { scaleToZero: { idleSeconds: 1 } }),
      'ws-lazy/handler.js': ECHO,
      ...vendoredWs('ws-lazy'),
      'ws-idle/function.yaml': functionManifest('ws-idle', { scaleToZero: { idleSeconds: 1 } }),
      'ws-idle/handler.js': NO_UPGRADE,
      'plain/function.yaml': functionManifest('plain'),
      'plain/handler.js': NO_UPGRADE,
      'ws-limited/function.yaml': functionManifest('ws-limited', { scale: { concurrency: 1, queue: 1 } }),
      'ws-limited/handler.js': ECHO,
      ...vendoredWs('ws-limited'),
    });
    system = await startTestSystem({ url: repo.dir, proxyThread });
    await eventually(
      async () =>
        (await system.functionStatus('ws-echo'))?.phase === 'Ready' &&
        (await system.functionStatus('plain'))?.phase === 'Ready' &&
        (await system.functionStatus('ws-limited'))?.phase === 'Ready' &&
        (await system.functionStatus('ws-lazy'))?.phase === 'ScaledToZero' &&
        (await system.functionStatus('ws-idle'))?.phase === 'ScaledToZero',
      60_000,
      'functions deployed',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('echoes text and binary messages, on the sub-path the client asked for', async () => {
    const { socket, first } = await connect(wsUrl('ws-echo/chat/room-1?user=ann'));
    try {
      expect(JSON.parse(first)).toEqual({
        url: '/chat/room-1?user=ann',
        forwardedPrefix: '/fn/default/ws-echo',
      });
      expect(await reply(socket, 'hello')).toBe('hello');
      // Many messages each way, in order.
      await expectEchoes(socket, 200);
    } finally {
      await close(socket);
    }
  });

  it("passes on a function's refusal as it gave it, and a plain request still works", async () => {
    expect((await upgradeStatus(`${system.url}/fn/default/nope`)).status).toBe(404);
    const refused = await upgradeStatus(`${system.url}/fn/default/plain`);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body).error).toContain('does not accept WebSockets');
    const res = await system.call('/fn/default/plain');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it('wakes a function at zero, and an open connection keeps it from scaling to zero', async () => {
    const { socket, first } = await connect(wsUrl('ws-lazy/'));
    try {
      expect(JSON.parse(first).url).toBe('/');
      // The other function, idle since this call, parks once its idle second has passed: by then the
      // one with the open connection has been as long without a request.
      expect((await system.call('/fn/default/ws-idle')).status).toBe(200);
      await eventually(async () => system.platform.isParked('default', 'ws-idle'), 20_000, 'ws-idle parked');
      expect(system.platform.isParked('default', 'ws-lazy')).toBe(false);
      expect(await reply(socket, 'still here')).toBe('still here');
    } finally {
      await close(socket);
    }
    // Once it has closed, nothing holds it: it parks too.
    await eventually(async () => system.platform.isParked('default', 'ws-lazy'), 20_000, 'ws-lazy parked');
  });

  it('counts an open connection against spec.scale.concurrency: a request waits behind it, an upgrade over the queue is a 503', async () => {
    const { socket } = await connect(wsUrl('ws-limited/'));
    let waiting: Promise<Response> | undefined;
    try {
      // concurrency 1, queue 1: the socket holds the slot, the request takes the queue's place.
      waiting = system.call('/fn/default/ws-limited/');
      const settled = await Promise.race([
        waiting.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 500)),
      ]);
      expect(settled).toBe(false);
      const over = await upgradeStatus(`${system.url}/fn/default/ws-limited/`);
      expect(over.status).toBe(503);
      expect(JSON.parse(over.body).error).toContain(
        'function default/ws-limited is at its concurrency limit',
      );
      expect(await reply(socket, 'still mine')).toBe('still mine');
    } finally {
      await close(socket);
    }
    // The socket closed: the request that waited has the slot.
    const res = await (waiting as Promise<Response>);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });
});

describe('WebSockets through /fn/ to the Python and Go runtimes', () => {
  let repo: TestRepo;
  let system: TestSystem;
  const name = (runtime: string) => `ws-${runtime.replace(/[^a-z0-9]/g, '')}`;

  beforeAll(async () => {
    ({ repo, system } = await startStreamRuntimes(name));
  }, 300_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it.each(STREAM_RUNTIMES)('%s: echoes text and binary messages, in order', async (runtime) => {
    const url = `${system.url.replace(/^http/, 'ws')}/fn/default/${name(runtime)}/ws`;
    // No greeting from these: the first message is the echo of the first sent.
    const { socket, first } = await new Promise<{ socket: Socket; first: string }>((resolve, reject) => {
      const ws = new WebSocket(url);
      const socket = track(ws);
      ws.addEventListener(
        'open',
        () => void reply(socket, 'hello').then((f) => resolve({ socket, first: String(f) })),
      );
      ws.addEventListener(
        'error',
        () =>
          void upgradeStatus(url.replace(/^ws/, 'http')).then((refused) =>
            reject(new Error(`the upgrade failed: ${refused.status} ${refused.body}`)),
          ),
      );
    });
    try {
      expect(first).toBe('hello');
      await expectEchoes(socket, 100);
    } finally {
      await close(socket);
    }
  });
});
