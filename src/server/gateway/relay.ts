/**
 * The gateway thread's way to the main thread: requests it does not proxy itself (the API,
 * webhooks, functions that are not ready) are passed on as they came over the private unix socket,
 * and the answers streamed back, those given before the request body was read included.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import type { Dispatcher } from 'undici';
import { sendJson, writeUpstreamChunk } from '../../proxy/answers.js';
import { RELAYED_CLIENT_ADDRESS } from '../../proxy/client-address.js';
import { stripHopByHop, stripHopByHopRaw } from '../../proxy/hop-by-hop.js';
import { Pool } from '../../proxy/undici-parts.js';

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
        // Not the request itself: undici destroys the body it was given when the main thread answers
        // early, which would leave the client's connection open and no longer read (the answer
        // could then not end it). Through a stream of its own, the request stays the relay's.
        body: hasBody ? req.pipe(new PassThrough()) : null,
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
  private early = false;

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
    const answer = stripHopByHop(headers);
    // An answer before the client's body was read (a 413, a 401): the rest of the body would be the
    // next request's start, so the connection ends with it, as fastify's own early answers say.
    this.early = !this.req.complete;
    if (this.early) answer.connection = 'close';
    this.res.writeHead(statusCode, answer);
    // The main thread sent its headers, so the client gets them now: a log stream that follows sends
    // its headers and then waits for lines, and node:http would hold them until the first one.
    this.res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    writeUpstreamChunk(this.res, controller, chunk);
  }

  onResponseEnd(): void {
    this.finished = true;
    if (this.early) this.endEarly();
    else this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finished = true;
    if (this.res.destroyed) {
      this.req.resume();
      return;
    }
    const body = { error: `sless is not answering: ${error.message}` };
    if (this.req.complete || this.res.headersSent) {
      this.req.resume();
      sendJson(this.res, 503, body, { 'retry-after': '1' });
      return;
    }
    const payload = JSON.stringify(body);
    this.res.writeHead(503, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
      'retry-after': '1',
      connection: 'close',
    });
    this.res.write(payload);
    this.endEarly();
  }

  /**
   * Ends an answer the client got before its body was read: the rest of the body is discarded, and
   * the public listener's lingering close (lingerOnClose) ends the connection once the client's
   * body has ended, or cuts it after a bound.
   */
  private endEarly(): void {
    this.req.unpipe();
    this.req.resume();
    this.res.end();
  }
}
