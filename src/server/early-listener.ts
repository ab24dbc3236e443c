/**
 * The client-facing socket from before the API exists until it closes. The port is bound first, so
 * whoever waits for it is not kept waiting while the modules load; requests are held until
 * something can answer them truthfully; and on the gateway thread's private socket connections are
 * kept open, so the relay always receives the answer.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { adoptRelayedClientAddress } from '../proxy/client-address.js';
import { lingerOnClose, trackRequest } from './lingering-close.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * On the gateway's private socket an answer never closes the connection, not even one given before
 * the body was read (fastify's 413 says `connection: close`): closing while the relay still writes
 * the body makes its write fail (EPIPE) before it has read the answer, and the client would get a 503
 * instead of the answer. The rest of the body is read and discarded here (node:http dumps what the
 * app left unread), and the relay, once it has the whole answer, stops sending and closes the
 * connection itself; it tells the client `connection: close`.
 */
function keepRelayConnection(res: ServerResponse): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    this.removeHeader('connection');
    for (const headers of args)
      if (headers !== null && typeof headers === 'object' && !Array.isArray(headers))
        for (const name of Object.keys(headers))
          if (name.toLowerCase() === 'connection') delete (headers as Record<string, unknown>)[name];
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
}

/** Where clients' requests come from: a port of its own (EarlyListener) or the gateway thread. */
export interface ClientListener {
  /** The server fastify runs on. */
  readonly server: Server;
  /** The public address, as fastify's `listen` reports it, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  serveEarly(matches: (url: string | undefined) => boolean, handler: Handler): void;
  attach(handler: Handler): void;
  /** Stops taking clients and lets requests in flight end, before the API closes. */
  drainClients?(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A port bound before the rest of sless has loaded. Loading the API, the proxy and their schemas
 * takes most of the start, and the port is what a user, a supervisor or a script waits for, so it is
 * taken first. Requests that arrive meanwhile are held, not answered: each one goes to the real
 * handler once it is attached, so nothing answers before it can answer truthfully (`/readyz` says
 * 503 until sless is ready, as it always did). A start that fails exits, which closes the port.
 */
export class EarlyListener implements ClientListener {
  private handler: Handler | undefined;
  private early: { matches: (url: string | undefined) => boolean; handler: Handler } | undefined;
  private held: Array<[IncomingMessage, ServerResponse]> = [];

  private constructor(readonly server: Server) {}

  static listen(host: string, port: number): Promise<EarlyListener> {
    return EarlyListener.bind((server, listening) => server.listen(port, host, listening), false);
  }

  /**
   * On a unix socket only the gateway thread reaches: its requests carry the client's address in a
   * header, which is trusted here and nowhere else.
   */
  static relayedTo(socketPath: string): Promise<EarlyListener> {
    return EarlyListener.bind((server, listening) => server.listen(socketPath, listening), true);
  }

  private static async bind(
    listen: (server: Server, listening: () => void) => void,
    relayed: boolean,
  ): Promise<EarlyListener> {
    let listener: EarlyListener | undefined;
    const server = createServer((req, res) => {
      if (relayed) {
        adoptRelayedClientAddress(req);
        keepRelayConnection(res);
      } else trackRequest(req);
      listener?.dispatch(req, res);
    });
    // Clients' connections: an answer before the body was read closes without a reset.
    if (!relayed) lingerOnClose(server);
    listener = new EarlyListener(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      listen(server, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return listener;
  }

  /** The address as fastify's `listen` reports it, e.g. `http://127.0.0.1:8080`. */
  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') return String(address);
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }

  /**
   * Requests `matches` accepts go to `handler` from now on (the /fn/ proxy, which needs only the
   * platform); the others are still held for `attach`.
   */
  serveEarly(matches: (url: string | undefined) => boolean, handler: Handler): void {
    this.early = { matches, handler };
    const held = this.held;
    this.held = [];
    for (const [req, res] of held) this.dispatch(req, res);
  }

  /** Every request from now on, and those held so far, go to `handler`. */
  attach(handler: Handler): void {
    this.handler = handler;
    const held = this.held;
    this.held = [];
    for (const [req, res] of held) handler(req, res);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): void {
    if (this.handler) this.handler(req, res);
    else if (this.early?.matches(req.url)) this.early.handler(req, res);
    else this.held.push([req, res]);
  }
}
