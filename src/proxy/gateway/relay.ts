import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { sendJson, writeUpstreamChunk } from '../answers.js';
import { RELAYED_CLIENT_ADDRESS } from '../client-address.js';
import { stripHopByHop, stripHopByHopRaw } from '../hop-by-hop.js';
import { Pool } from '../undici-parts.js';

/**
 * Passes requests from the gateway thread to the main thread's private unix socket, as they came:
 * method, URL and end-to-end headers (Host included: the loopback guard reads it) plus the client's
 * address, which the unix socket would lose. No timeouts: a log stream may last as long as its client.
 */
export class MainThreadRelay {
  private readonly pool: Pool;

  constructor(socketPath: string) {
    this.pool = new Pool('http://sless.main', {
      socketPath,
      keepAliveTimeout: 30_000,
      connections: 64,
      pipelining: 1,
    });
  }

  relay(req: IncomingMessage, res: ServerResponse): void {
    const headers = stripHopByHopRaw(req.rawHeaders);
    // A client cannot claim an address: the header is the relay's alone.
    for (let i = headers.length - 2; i >= 0; i -= 2)
      if (headers[i] === RELAYED_CLIENT_ADDRESS) headers.splice(i, 2);
    headers.push(RELAYED_CLIENT_ADDRESS, req.socket.remoteAddress ?? '');
    const hasBody =
      req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    this.pool.dispatch(
      {
        origin: 'http://sless.main',
        path: req.url ?? '/',
        method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
        headers,
        body: hasBody ? req : null,
        headersTimeout: 0,
        bodyTimeout: 0,
      },
      new RelayedExchange(req, res),
    );
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** One relayed request: the main thread's answer is written to the client as it arrives. */
class RelayedExchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private finished = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    this.res.on('close', () => {
      if (!this.finished) this.controller?.abort(new Error('client closed the connection'));
    });
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200) return;
    this.res.writeHead(statusCode, stripHopByHop(headers));
    // The main thread sent its headers, so the client gets them now: a log stream that follows sends
    // its headers and then waits for lines, and node:http would hold them until the first one.
    this.res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    writeUpstreamChunk(this.res, controller, chunk);
  }

  onResponseEnd(): void {
    this.finished = true;
    this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finished = true;
    this.req.resume();
    if (this.res.destroyed) return;
    sendJson(this.res, 503, { error: `sless is not answering: ${error.message}` }, { 'retry-after': '1' });
  }
}
