/**
 * Upstreams that never answer, against the real proxy and real sockets: one that takes the request
 * and sends nothing, and one that sends its headers and a first chunk and then nothing more. The
 * proxy's own timeouts (timeoutSec + 1 s, for the headers and for every gap in the body) must end
 * both; without them undici waits its default of 300 s, past this file's time limit.
 */
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FunctionProxy } from './function-proxy.js';

const TIMEOUT_SEC = 1;

interface Stalling {
  server: Server;
  origin: string;
  /** Resolves once the upstream's connection of the request has closed. */
  closed: Promise<void>;
  /** Requests the upstream received. */
  seen: string[];
}

/** A real upstream that answers as `answer` says and then never again; it notes when its client leaves. */
async function stallingUpstream(answer: (res: ServerResponse) => void): Promise<Stalling> {
  const seen: string[] = [];
  let closedNow = () => {};
  const closed = new Promise<void>((resolve) => {
    closedNow = resolve;
  });
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    seen.push(req.url ?? '');
    req.socket.once('close', () => closedNow());
    answer(res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.once('close', () => {
    for (const socket of sockets) socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed, seen };
}

async function proxyFor(origin: string): Promise<{ server: Server; port: number; releases: string[] }> {
  const releases: string[] = [];
  const proxy = new FunctionProxy({
    routes: {
      resolve: async () => ({
        state: 'ready',
        origin,
        timeoutSec: TIMEOUT_SEC,
        release: () => releases.push(origin),
      }),
    },
  });
  const server = createServer((req, res) => void proxy.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, releases };
}

interface ClientView {
  status: number;
  chunks: string[];
  /** How the answer ended: 'end' (complete) or 'aborted' (the proxy cut it). */
  ending: 'end' | 'aborted';
}

function get(port: number): Promise<ClientView> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/fn/team/stuck/' }, (res) => {
      const chunks: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => chunks.push(chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, chunks, ending: 'end' }));
      res.once('aborted', () => resolve({ status: res.statusCode ?? 0, chunks, ending: 'aborted' }));
      res.once('error', () => resolve({ status: res.statusCode ?? 0, chunks, ending: 'aborted' }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the proxy and an upstream that never answers', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('answers its own 504 to a request whose upstream never sends a header, and lets the upstream go', async () => {
    const upstream = await stallingUpstream(() => {
      // Takes the request and sends nothing, ever.
    });
    const proxy = await proxyFor(upstream.origin);
    servers.push(upstream.server, proxy.server);
    const view = await get(proxy.port);
    expect(view).toEqual({
      status: 504,
      chunks: [JSON.stringify({ error: `function team/stuck timed out after ${TIMEOUT_SEC}s` })],
      ending: 'end',
    });
    // The proxy gave up on the connection, and released the route once.
    await upstream.closed;
    expect(upstream.seen).toEqual(['/']);
    expect(proxy.releases).toEqual([upstream.origin]);
  }, 20_000);

  it('cuts an answer whose body stalls after the headers and a first chunk, and lets the upstream go', async () => {
    const upstream = await stallingUpstream((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first chunk;');
      // ...and never another byte, nor the end.
    });
    const proxy = await proxyFor(upstream.origin);
    servers.push(upstream.server, proxy.server);
    const view = await get(proxy.port);
    // The client had the headers and the chunk that came, then the answer was cut: not ended as
    // if it were whole.
    expect(view).toEqual({ status: 200, chunks: ['first chunk;'], ending: 'aborted' });
    await upstream.closed;
    expect(upstream.seen).toEqual(['/']);
    expect(proxy.releases).toEqual([upstream.origin]);
  }, 20_000);
});
