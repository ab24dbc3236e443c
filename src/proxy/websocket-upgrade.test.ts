/**
 * The WebSocket tunnel goes where a request would: to the endpoint the route's picker chooses (a kube
 * route's serving-revision pods), not to the route's origin (the Service, which may still send a new
 * connection to a replaced pod); the endpoint counts the socket as in flight until it closes. Real
 * servers on loopback: a front that hands upgrades to the proxy, and two `ws` servers playing the
 * Service and the pod.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { RouteResolver, RouteState } from '../core/interfaces.js';
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
