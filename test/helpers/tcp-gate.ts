/**
 * A TCP relay in front of a real server (a broker, say) that a test can cut: `relay` passes bytes
 * both ways, `reset` accepts each connection and resets it at once (as a loaded or starting server
 * does), `refuse` stops listening, so connecting fails with ECONNREFUSED. Switching away from
 * `relay` resets every connection it carries. `close` ends it all; nothing is left listening.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../src/platform/local/ports.js';

export type GateMode = 'relay' | 'reset' | 'refuse';

export interface TcpGate {
  port: number;
  /** Connections reset in `reset` mode so far. */
  resets(): number;
  set(mode: GateMode): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpGate(target: { host: string; port: number }, mode: GateMode): Promise<TcpGate> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let current: GateMode = mode;
  let resets = 0;
  let server: Server | undefined;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        track(client);
        if (current !== 'relay') {
          resets++;
          client.resetAndDestroy();
          return;
        }
        const upstream = connect(target.port, target.host);
        track(upstream);
        client.pipe(upstream);
        upstream.pipe(client);
        const cut = () => {
          if (!client.destroyed) client.resetAndDestroy();
          if (!upstream.destroyed) upstream.destroy();
        };
        client.on('close', cut);
        upstream.on('close', cut);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        server = s;
        resolve();
      });
    });
  const unlisten = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) if (!socket.destroyed) socket.resetAndDestroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  if (mode !== 'refuse') await listen();
  return {
    port,
    resets: () => resets,
    async set(next) {
      current = next;
      if (next === 'refuse') return unlisten();
      for (const socket of sockets) if (next !== 'relay' && !socket.destroyed) socket.resetAndDestroy();
      if (!server) await listen();
    },
    close: unlisten,
  };
}
