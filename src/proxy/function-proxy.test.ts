/**
 * FunctionProxy between real HTTP clients and real upstream servers: a GET dropped by a draining
 * upstream is sent once more to the current route while a POST is never sent twice (a 502); connections
 * kept per revision, the previous one's kept for stragglers; hop-by-hop headers stripped both ways with
 * X-Forwarded-* and X-Request-Id set; a request body passed on as it comes, its first chunk at the
 * function before the client has sent its last; and large answers streamed under backpressure or cut
 * when the client leaves, releasing the route once; a route's endpoints picked per request as it is sent and
 * told back when it ends (a retry included), its origin serving when there is none.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteState } from '../core/interfaces.js';
import { FunctionProxy } from './function-proxy.js';
import { LeastInFlight } from './least-in-flight.js';

// A real upstream that drops the first connection of each request it is told to, before answering:
// what a draining old revision does to a kept-alive connection during a rollout.
async function upstream(dropFirst: number): Promise<{ server: Server; origin: string; seen: string[] }> {
  const seen: string[] = [];
  let dropsLeft = dropFirst;
  const server = createServer((req, res) => {
    seen.push(req.method ?? '');
    if (dropsLeft > 0) {
      dropsLeft--;
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`answered ${req.method}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

async function proxyServer(
  routes: () => RouteState,
  previousRevisionGraceMs?: number,
): Promise<{ server: Server; port: number; releases: string[] }> {
  const releases: string[] = [];
  const proxy = new FunctionProxy({
    ...(previousRevisionGraceMs === undefined ? {} : { previousRevisionGraceMs }),
    routes: {
      resolve: async () => {
        const route = routes();
        return route.state === 'ready' ? { ...route, release: () => releases.push(route.origin) } : route;
      },
    },
  });
  const server = createServer((req, res) => void proxy.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, releases };
}

function call(port: number, method: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path: '/fn/team/hello/' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(method === 'POST' ? '{"x":1}' : undefined);
  });
}

describe('FunctionProxy and a dropped upstream connection', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  it('sends a GET once more, to the route as it is now, and releases both routes once', async () => {
    const old = await upstream(1);
    const next = await upstream(0);
    servers.push(old.server, next.server);
    let resolved = 0;
    const proxy = await proxyServer(() => ({
      state: 'ready',
      origin: resolved++ === 0 ? old.origin : next.origin,
      timeoutSec: 5,
    }));
    servers.push(proxy.server);
    expect(await call(proxy.port, 'GET')).toEqual({ status: 200, body: 'answered GET' });
    expect(old.seen).toEqual(['GET']);
    expect(next.seen).toEqual(['GET']);
    expect(proxy.releases.sort()).toEqual([next.origin, old.origin].sort());
  });

  it('never sends a request with a body twice: a dropped POST is a 502', async () => {
    const only = await upstream(1);
    servers.push(only.server);
    const proxy = await proxyServer(() => ({ state: 'ready', origin: only.origin, timeoutSec: 5 }));
    servers.push(proxy.server);
    const answer = await call(proxy.port, 'POST');
    expect(answer.status).toBe(502);
    expect(answer.body).toContain('function team/hello is unreachable');
    expect(only.seen).toEqual(['POST']);
    expect(proxy.releases).toEqual([only.origin]);
  });
});

// A real upstream that answers with the number of the connection each request came on, and holds a
// request whose path says so until it is told to answer.
async function connectionCounter(): Promise<{
  server: Server;
  origin: string;
  holding: Promise<void>;
  answerHeld: () => void;
}> {
  let connections = 0;
  const held: (() => void)[] = [];
  let arrived = () => {};
  const holding = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer((req, res) => {
    const answer = () => res.writeHead(200).end(`connection ${(req.socket as { n?: number }).n}`);
    if (req.url === '/hold') {
      held.push(answer);
      arrived();
    } else answer();
  });
  server.on('connection', (socket) => {
    (socket as { n?: number }).n = ++connections;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holding,
    answerHeld: () => {
      for (const answer of held.splice(0)) answer();
    },
  };
}

function get(port: number, path = '/'): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: `/fn/team/hello${path}` }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
    })
      .on('error', reject)
      .end();
  });
}

/** Servers a test starts, closed with their connections after it. */
function closedAfterEach(): Server[] {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
  return servers;
}

describe('FunctionProxy and a Service that fronts every revision', () => {
  const servers = closedAfterEach();

  it('opens new connections for a new revision, keeps the previous one for stragglers, and lets its requests finish', async () => {
    const service = await connectionCounter();
    servers.push(service.server);
    let revision: string | undefined = 'r1';
    const proxy = await proxyServer(() => ({
      state: 'ready',
      origin: service.origin,
      timeoutSec: 5,
      ...(revision ? { revision } : {}),
    }));
    servers.push(proxy.server);

    // Kept alive: the same revision stays on its connection.
    expect(await get(proxy.port)).toBe('200 connection 1');
    expect(await get(proxy.port)).toBe('200 connection 1');
    // A new revision does not reuse it, idle as it is.
    revision = 'r2';
    expect(await get(proxy.port)).toBe('200 connection 2');
    expect(await get(proxy.port)).toBe('200 connection 2');
    // A request that resolved the route just before it changed still goes through the previous
    // revision's agent.
    revision = 'r1';
    expect(await get(proxy.port)).toBe('200 connection 1');
    const heldOnFirst = get(proxy.port, '/hold');
    await service.holding;
    // A third revision closes the first one's agent, once its held request has its answer.
    revision = 'r3';
    expect(await get(proxy.port)).toBe('200 connection 3');
    service.answerHeld();
    expect(await heldOnFirst).toBe('200 connection 1');
  });

  it('a rollback to the previous revision after its grace opens new connections: its old ones lead to pods that are gone', async () => {
    const service = await connectionCounter();
    servers.push(service.server);
    let revision = 'r1';
    const proxy = await proxyServer(
      () => ({ state: 'ready', origin: service.origin, timeoutSec: 5, revision }),
      0,
    );
    servers.push(proxy.server);
    expect(await get(proxy.port)).toBe('200 connection 1');
    revision = 'r2';
    expect(await get(proxy.port)).toBe('200 connection 2');
    revision = 'r1';
    expect(await get(proxy.port)).toBe('200 connection 3');
    expect(await get(proxy.port)).toBe('200 connection 3');
  });

  it('shares connections across routes that name no revision', async () => {
    const service = await connectionCounter();
    servers.push(service.server);
    const proxy = await proxyServer(() => ({ state: 'ready', origin: service.origin, timeoutSec: 5 }));
    servers.push(proxy.server);
    expect(await get(proxy.port)).toBe('200 connection 1');
    expect(await get(proxy.port)).toBe('200 connection 1');
  });
});

describe('FunctionProxy headers', () => {
  const servers = closedAfterEach();

  // An upstream that answers with the header lines it received, and with hop-by-hop headers of its own.
  async function headerEcho(): Promise<{ server: Server; origin: string }> {
    const server = createServer((req, res) => {
      res.writeHead(200, [
        'Content-Type',
        'application/json',
        'Connection',
        'x-upstream-private',
        'X-Upstream-Private',
        'hidden',
        'Proxy-Authenticate',
        'Basic',
        'X-Kept',
        'yes',
      ]);
      res.end(JSON.stringify(req.rawHeaders));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }

  function send(
    port: number,
    headers: string[],
  ): Promise<{ lines: string[]; headers: Record<string, unknown>; status: number }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/fn/team/hello/x?y=1', headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () =>
          resolve({ lines: JSON.parse(body) as string[], headers: res.headers, status: res.statusCode ?? 0 }),
        );
      });
      req.on('error', reject);
      req.end();
    });
  }

  const pairs = (lines: string[]) =>
    Array.from({ length: lines.length / 2 }, (_, i) => [lines[2 * i], lines[2 * i + 1]]);

  it('passes end-to-end lines, strips hop-by-hop ones both ways, and sets the X-Forwarded-* and X-Request-Id', async () => {
    const echo = await headerEcho();
    servers.push(echo.server);
    const proxy = await proxyServer(() => ({ state: 'ready', origin: echo.origin, timeoutSec: 5 }));
    servers.push(proxy.server);
    const answer = await send(proxy.port, [
      'Host',
      'fn.example',
      'Connection',
      'keep-alive, X-Hop-Secret',
      'X-Hop-Secret',
      'do-not-forward',
      'Proxy-Authorization',
      'Basic abc',
      'X-Forwarded-For',
      '203.0.113.7',
      'X-Forwarded-For',
      '198.51.100.2',
      'X-End-To-End',
      'one',
      'X-End-To-End',
      'two',
    ]);
    expect(answer.status).toBe(200);
    const received = pairs(answer.lines);
    const requestId = received.find(([name]) => name === 'x-request-id')?.[1];
    expect(requestId).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    expect(received).toEqual([
      // undici's own: the upstream connection is kept alive, whatever the client's said.
      ['host', echo.origin.replace('http://', '')],
      ['connection', 'keep-alive'],
      ['x-end-to-end', 'one'],
      ['x-end-to-end', 'two'],
      ['x-forwarded-host', 'fn.example'],
      ['x-forwarded-proto', 'http'],
      ['x-forwarded-for', '203.0.113.7, 198.51.100.2, 127.0.0.1'],
      ['x-forwarded-prefix', '/fn/team/hello'],
      ['x-request-id', requestId],
    ]);
    expect(answer.headers['x-kept']).toBe('yes');
    expect(answer.headers).not.toHaveProperty('x-upstream-private');
    expect(answer.headers).not.toHaveProperty('proxy-authenticate');

    // A client's own request id is passed on, and each generated one is new.
    const again = await send(proxy.port, ['Host', 'fn.example', 'X-Request-Id', 'client-7']);
    expect(pairs(again.lines).filter(([name]) => name === 'x-request-id')).toEqual([
      ['x-request-id', 'client-7'],
    ]);
    const third = pairs((await send(proxy.port, ['Host', 'fn.example'])).lines).find(
      ([name]) => name === 'x-request-id',
    )?.[1];
    expect(third).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    expect(third).not.toBe(requestId);
  });
});

describe('FunctionProxy streaming', () => {
  const servers = closedAfterEach();

  // 16 MiB in 64 KiB chunks, each chunk filled with its own index, so a lost or reordered chunk shows.
  const CHUNKS = 256;
  const chunk = (i: number) => Buffer.alloc(64 * 1024, i % 251);

  async function bigUpstream(): Promise<{ server: Server; origin: string; closed: Promise<boolean> }> {
    let finished: (complete: boolean) => void = () => {};
    const closed = new Promise<boolean>((resolve) => {
      finished = resolve;
    });
    const server = createServer(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.on('close', () => finished(res.writableFinished));
      for (let i = 0; i < CHUNKS && !res.destroyed; i++)
        if (!res.write(chunk(i))) await new Promise((resolve) => res.once('drain', resolve));
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed };
  }

  it('passes a chunked request body on as it comes: the first chunk reaches the function before the client sends the last', async () => {
    // The function answers once the body has ended; it tells the test when its first chunk came.
    let firstChunk: (text: string) => void = () => {};
    const arrived = new Promise<string>((resolve) => {
      firstChunk = resolve;
    });
    const fn = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (part: string) => {
        if (body === '') firstChunk(part);
        body += part;
      });
      req.on('end', () => res.end(`got ${body} (${req.headers['transfer-encoding']})`));
    });
    await new Promise<void>((resolve) => fn.listen(0, '127.0.0.1', resolve));
    servers.push(fn);
    const origin = `http://127.0.0.1:${(fn.address() as AddressInfo).port}`;
    const proxy = await proxyServer(() => ({ state: 'ready', origin, timeoutSec: 30 }));
    servers.push(proxy.server);
    let answered: (answer: { status: number; body: string }) => void = () => {};
    const answer = new Promise<{ status: number; body: string }>((resolve) => {
      answered = resolve;
    });
    const req = request(
      { host: '127.0.0.1', port: proxy.port, method: 'POST', path: '/fn/team/hello/upload' },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (part: string) => {
          body += part;
        });
        res.on('end', () => answered({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', () => {});
    // No content-length: the client's body is chunked, and its end is not yet sent.
    req.write('first,');
    const first = await Promise.race([
      arrived,
      new Promise<string>((resolve) => setTimeout(() => resolve('nothing within 5 s'), 5000)),
    ]);
    expect(first).toBe('first,');
    req.end('last');
    expect(await answer).toEqual({ status: 200, body: 'got first,last (chunked)' });
    expect(proxy.releases).toEqual([origin]);
  });

  it('streams a large answer to a client that reads slowly, whole and in order', async () => {
    const big = await bigUpstream();
    servers.push(big.server);
    const proxy = await proxyServer(() => ({ state: 'ready', origin: big.origin, timeoutSec: 30 }));
    servers.push(proxy.server);
    const received = await new Promise<Buffer>((resolve, reject) => {
      request({ host: '127.0.0.1', port: proxy.port, path: '/fn/team/hello/' }, (res) => {
        const parts: Buffer[] = [];
        // Not reading for a while fills the socket buffers: the proxy must hold the function back.
        res.pause();
        setTimeout(() => res.resume(), 300);
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve(Buffer.concat(parts)));
        res.on('error', reject);
      })
        .on('error', reject)
        .end();
    });
    expect(received.length).toBe(CHUNKS * 64 * 1024);
    for (let i = 0; i < CHUNKS; i++)
      expect(received.subarray(i * 64 * 1024, (i + 1) * 64 * 1024).equals(chunk(i)), `chunk ${i}`).toBe(true);
    expect(proxy.releases).toEqual([big.origin]);
  });

  it('stops the function answer when the client goes away mid-answer, and releases the route once', async () => {
    const big = await bigUpstream();
    servers.push(big.server);
    const proxy = await proxyServer(() => ({ state: 'ready', origin: big.origin, timeoutSec: 30 }));
    servers.push(proxy.server);
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: proxy.port, path: '/fn/team/hello/' }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => {});
      req.on('response', (res) => res.on('error', reject));
      req.end();
    });
    // The upstream connection is cut before the function wrote everything.
    expect(await big.closed).toBe(false);
    while (proxy.releases.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(proxy.releases).toEqual([big.origin]);
  });
});

describe("FunctionProxy and a route's endpoints", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  it('sends each request to the endpoint with the fewest in flight, and tells each end back', async () => {
    const a = await connectionCounter();
    const b = await connectionCounter();
    servers.push(a.server, b.server);
    const picker = new LeastInFlight([a.origin, b.origin]);
    // The route's own origin is never reached while endpoints are picked.
    const proxy = await proxyServer(() => ({
      state: 'ready',
      origin: 'http://127.0.0.1:9',
      endpoints: picker,
      timeoutSec: 5,
    }));
    servers.push(proxy.server);
    const held = [
      get(proxy.port, '/hold'),
      get(proxy.port, '/hold'),
      get(proxy.port, '/hold'),
      get(proxy.port, '/hold'),
    ];
    await Promise.all([a.holding, b.holding]);
    while (picker.inFlightOf(a.origin) + picker.inFlightOf(b.origin) < 4)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect([picker.inFlightOf(a.origin), picker.inFlightOf(b.origin)]).toEqual([2, 2]);
    // Answered until all four are: one may not have reached its server yet.
    let answered = false;
    const all = Promise.all(held).then((bodies) => {
      answered = true;
      return bodies;
    });
    while (!answered) {
      a.answerHeld();
      b.answerHeld();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect((await all).every((body) => body.startsWith('200 '))).toBe(true);
    while (proxy.releases.length < 4) await new Promise((resolve) => setTimeout(resolve, 10));
    expect([picker.inFlightOf(a.origin), picker.inFlightOf(b.origin)]).toEqual([0, 0]);
  });

  it('sends a GET dropped by its endpoint once more, to the next pick, telling both back', async () => {
    const dropping = await upstream(1);
    const next = await upstream(0);
    servers.push(dropping.server, next.server);
    const picker = new LeastInFlight([dropping.origin, next.origin]);
    const proxy = await proxyServer(() => ({
      state: 'ready',
      origin: 'http://127.0.0.1:9',
      endpoints: picker,
      timeoutSec: 5,
    }));
    servers.push(proxy.server);
    expect(await call(proxy.port, 'GET')).toEqual({ status: 200, body: 'answered GET' });
    expect(dropping.seen).toEqual(['GET']);
    expect(next.seen).toEqual(['GET']);
    while (proxy.releases.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    expect([picker.inFlightOf(dropping.origin), picker.inFlightOf(next.origin)]).toEqual([0, 0]);
  });

  it("goes to the route's origin when the picker has no endpoint", async () => {
    const service = await upstream(0);
    servers.push(service.server);
    const proxy = await proxyServer(() => ({
      state: 'ready',
      origin: service.origin,
      endpoints: new LeastInFlight([]),
      timeoutSec: 5,
    }));
    servers.push(proxy.server);
    expect(await call(proxy.port, 'GET')).toEqual({ status: 200, body: 'answered GET' });
    expect(service.seen).toEqual(['GET']);
  });
});
