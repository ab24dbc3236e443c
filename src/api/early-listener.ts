import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * A port bound before the rest of sless has loaded. Loading the API, the proxy and their schemas
 * takes most of the start, and the port is what a user, a supervisor or a script waits for, so it is
 * taken first. Requests that arrive meanwhile are held, not answered: each one goes to the real
 * handler once it is attached, so nothing answers before it can answer truthfully (`/readyz` says
 * 503 until sless is ready, as it always did). A start that fails exits, which closes the port.
 */
export class EarlyListener {
  private handler: Handler | undefined;
  private early: { matches: (url: string | undefined) => boolean; handler: Handler } | undefined;
  private held: Array<[IncomingMessage, ServerResponse]> = [];

  private constructor(readonly server: Server) {}

  static async listen(host: string, port: number): Promise<EarlyListener> {
    let listener: EarlyListener | undefined;
    const server = createServer((req, res) => listener?.dispatch(req, res));
    listener = new EarlyListener(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
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
