/**
 * `Upgrade: websocket` requests to `/fn/{ns}/{name}/…`: passed to the function's ready revision
 * (its unix socket locally, its Service on kube) with the request's end-to-end headers plus the
 * Upgrade and Connection headers this one hop needs, and once the function switches protocols, the
 * two sockets are joined byte for byte. The function's answer when it refuses (any status but 101)
 * goes to the client as it came. An open connection is a request in flight until either side closes:
 * it keeps its function from scaling to zero, holds a slot of its concurrency limit (shared with the
 * thread's requests), and a rollout's drain waits for it.
 */
import type { IncomingMessage } from 'node:http';
import { request } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RouteResolver, RouteState } from '../core/interfaces.js';
import { isDnsLabel } from '../core/naming.js';
import type { AdmissionGates } from './admission-gates.js';
import { forwardedHeaders } from './function-proxy.js';

const FN_PATH = /^\/fn\/([^/?#]*)\/([^/?#]*)(.*)$/s;

type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

export interface UpgradeProxyOptions {
  routes: RouteResolver;
  /** Where an upgrade for a function unknown here goes (the gateway thread: the main thread). */
  elsewhere?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  onUpstreamError?: (functionKey: string, message: string) => void;
  /**
   * The gates of the thread's request proxy (FunctionProxy.admissions): an open socket holds a slot
   * of its function's concurrency as a request in flight does. Without them, sockets pass no limit.
   */
  admissions?: AdmissionGates;
}

/** Writes a small HTTP answer on a socket that has not been upgraded, and closes it. */
function refuse(socket: Duplex, status: number, reason: string, message: string, extra = ''): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\n${extra}` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** The status line and headers of an upstream answer, as raw HTTP/1.1 for the client's socket. */
function head(status: number, message: string, rawHeaders: readonly string[]): string {
  let out = `HTTP/1.1 ${status} ${message}\r\n`;
  for (let i = 0; i < rawHeaders.length; i += 2) out += `${rawHeaders[i]}: ${rawHeaders[i + 1]}\r\n`;
  return `${out}\r\n`;
}

export class UpgradeProxy {
  constructor(private readonly options: UpgradeProxyOptions) {}

  static isWebSocket(req: IncomingMessage): boolean {
    return (req.headers.upgrade ?? '').toLowerCase() === 'websocket';
  }

  /** Never throws: it runs in the server's 'upgrade' event, outside any error handling. */
  handle(req: IncomingMessage, socket: Duplex, upgradeHead: Buffer): void {
    socket.on('error', () => socket.destroy());
    this.forward(req, socket, upgradeHead).catch((error: Error) => {
      this.options.onUpstreamError?.(req.url ?? '', error.message);
      refuse(socket, 503, 'Service Unavailable', 'function routing is unavailable; try again');
    });
  }

  private async forward(req: IncomingMessage, socket: Duplex, upgradeHead: Buffer): Promise<void> {
    const match = FN_PATH.exec(req.url ?? '/');
    const ns = match?.[1] ?? '';
    const name = match?.[2] ?? '';
    const rest = match?.[3] ?? '';
    if (!match || !isDnsLabel(ns) || !isDnsLabel(name) || (rest !== '' && !/^[/?]/.test(rest))) {
      refuse(socket, 404, 'Not Found', `unknown function ${ns}/${name}`);
      return;
    }
    if (!UpgradeProxy.isWebSocket(req) || req.method !== 'GET') {
      refuse(socket, 400, 'Bad Request', 'only WebSocket upgrades (GET, Upgrade: websocket) are passed on');
      return;
    }
    const route = await this.options.routes.resolve(ns, name);
    if (route.state === 'unknown' && this.options.elsewhere) {
      this.options.elsewhere(req, socket, upgradeHead);
      return;
    }
    if (route.state === 'unknown') {
      refuse(socket, 404, 'Not Found', `unknown function ${ns}/${name}`);
      return;
    }
    if (route.state === 'unavailable') {
      refuse(socket, route.status, 'Unavailable', route.message);
      return;
    }
    const path = rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
    const headers = forwardedHeaders(req, `/fn/${ns}/${name}`);
    headers.push('connection', 'Upgrade', 'upgrade', 'websocket');
    const tunnel = () => this.tunnel(route, `${ns}/${name}`, path, headers, socket, upgradeHead);
    const { admissions } = this.options;
    if (!route.admission || !admissions) {
      tunnel();
      return;
    }
    // As a request: admitted below the limit, queued behind the others up to the function's
    // timeout, or a 503 now when its queue is full; admitted, it holds the slot until it closes.
    // A client that leaves while it waits only half-closes the socket (the server allows half-open
    // sockets), which must close to leave the queue: nothing is to be sent to it any more.
    const leftWaiting = () => socket.destroy();
    socket.once('end', leftWaiting);
    admissions.admit(ns, name, route.admission, route.timeoutSec * 1000, socket, {
      start: () => {
        socket.off('end', leftWaiting);
        tunnel();
      },
      left: () => route.release?.(),
      turnAway: (message) => {
        route.release?.();
        refuse(socket, 503, 'Service Unavailable', message, 'retry-after: 1\r\n');
      },
    });
  }

  /**
   * Asks `route` (a function, or the main thread for the gateway) to switch protocols, with these
   * headers; on 101 the client's socket and the upstream's are joined.
   */
  tunnel(
    route: ReadyRoute,
    key: string,
    path: string,
    headers: string[],
    client: Duplex,
    clientHead: Buffer,
  ): void {
    // A socket goes where a request would: to an instance of the serving revision the route's picker
    // chooses (a kube Service may still send a new connection to a replaced pod), counted as in
    // flight there until it closes.
    const picked = route.endpoints?.acquire();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (picked !== undefined) route.endpoints?.release(picked);
      route.release?.();
    };
    const origin = new URL(picked ?? route.origin);
    // Raw headers get no Host from node:http, and an HTTP/1.1 server may refuse a request without
    // one (Go's does, with a 400): the upstream's own, as undici gives a proxied request. A relayed
    // upgrade keeps the client's.
    if (!hasHeader(headers, 'host')) headers.push('host', route.socketPath ? 'localhost' : origin.host);
    const upstream = request({
      ...(route.socketPath
        ? { socketPath: route.socketPath }
        : { host: origin.hostname, port: origin.port || 80 }),
      method: 'GET',
      path,
      headers,
      agent: false,
      // The function must answer the upgrade within its timeout; a joined connection has none.
      timeout: route.timeoutSec * 1000 + 1000,
    });
    client.once('close', () => {
      upstream.destroy();
      release();
    });
    upstream.on('timeout', () => upstream.destroy(new Error(`no answer within ${route.timeoutSec}s`)));
    upstream.on('error', (error) => {
      this.options.onUpstreamError?.(key, error.message);
      release();
      refuse(client, 502, 'Bad Gateway', `function ${key} is unreachable: ${error.message}`);
    });
    upstream.on('response', (res) => {
      // The function refused the upgrade: its answer goes to the client as it is, then the socket closes.
      client.write(head(res.statusCode ?? 502, res.statusMessage ?? '', withClose(res.rawHeaders)));
      res.pipe(client);
      res.on('end', () => release());
    });
    upstream.on('upgrade', (res, fnSocket, fnHead) => {
      upstream.setTimeout(0);
      fnSocket.setTimeout(0);
      client.write(head(101, res.statusMessage ?? 'Switching Protocols', res.rawHeaders));
      if (fnHead.length > 0) client.write(fnHead);
      if (clientHead.length > 0) fnSocket.write(clientHead);
      fnSocket.on('error', () => client.destroy());
      client.on('error', () => fnSocket.destroy());
      fnSocket.once('close', () => {
        client.destroy();
        release();
      });
      client.once('close', () => fnSocket.destroy());
      fnSocket.pipe(client);
      client.pipe(fnSocket);
    });
    upstream.end();
  }
}

function hasHeader(raw: readonly string[], name: string): boolean {
  for (let i = 0; i < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === name) return true;
  return false;
}

/** An answer to a refused upgrade ends its connection: hop-by-hop framing of this socket is done. */
function withClose(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = (raw[i] as string).toLowerCase();
    if (lower === 'connection' || lower === 'keep-alive' || lower === 'transfer-encoding') continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  out.push('connection', 'close');
  return out;
}
