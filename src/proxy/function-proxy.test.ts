import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteState } from '../core/interfaces.js';
import { FunctionProxy } from './function-proxy.js';

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
): Promise<{ server: Server; port: number; releases: string[] }> {
  const releases: string[] = [];
  const proxy = new FunctionProxy({
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
