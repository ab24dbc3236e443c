/**
 * `ANY /fn/{ns}/{name}/*`, the invocation path: streams the request to the function's ready
 * revision over kept-alive connections and streams the answer back, with hop-by-hop headers
 * stripped both ways; the function's timeout bounds the wait (504 after it). It works on plain
 * node:http objects, below fastify, so that the hot path pays for no routing, hooks or reply
 * machinery; fastify's /fn/ routes call it too.
 */

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { AdmissionLimits, RouteResolver, RouteState } from '../core/interfaces.js';
import { isDnsLabel } from '../core/naming.js';
import type { QueueDepth } from '../core/proxy-tallies.js';
import { parseFunctionSegment } from '../core/revision-ref.js';
import { AdmissionGates } from './admission-gates.js';
import { sendJson, writeUpstreamChunk } from './answers.js';
import { clientAddressOf, RELAYED_CLIENT_ADDRESS } from './client-address.js';
import { stripHopByHop, stripHopByHopRaw } from './hop-by-hop.js';
import { rawPrefersAsync } from './prefer.js';
import { DEFAULT_MAX_STREAM_MS, isStreamed, startStream, streamHeaders } from './stream-limits.js';
import { keepTickObjectShapes } from './tick-object-shape.js';
import { Agent, Pool, errors as undiciErrors } from './undici-parts.js';

export interface FunctionProxyOptions {
  routes: RouteResolver;
  /** Called once per proxied request, for metrics. */
  onResponse?: (namespace: string, name: string, statusCode: number, durationMs: number) => void;
  onUpstreamError?: (functionKey: string, message: string) => void;
  /**
   * How long after a new revision takes over a request may still go through the previous one's
   * connections (default 5 s: several route-cache periods). Later, the previous revision asked for
   * again is a rollback: its pods are new, and its old connections lead to pods that are gone.
   */
  previousRevisionGraceMs?: number;
  /**
   * Where a request goes when its function is unknown here, instead of a 404 from this proxy: the
   * gateway thread knows ready and unavailable routes only, and hands the rest to the main thread,
   * which knows why (not loaded yet, parked and to be woken, truly unknown). Counted there, not here.
   */
  elsewhere?: (req: IncomingMessage, res: ServerResponse) => void;
  /** The longest a streamed answer may last, whatever its function's timeout (default an hour). */
  maxStreamMs?: number;
  /**
   * Where a request that prefers an asynchronous answer (`Prefer: respond-async`) goes, to be
   * queued instead of proxied; without it such a request goes `elsewhere` (the thread that queues),
   * or is served synchronously, as a server may ignore a preference.
   */
  asyncIntake?: (req: IncomingMessage, res: ServerResponse) => void;
}

/** The proxy as both platforms serve it: responses counted in metrics, upstream failures logged. */
export function observedFunctionProxy(options: {
  routes: RouteResolver;
  metrics: {
    proxyResponse(namespace: string, name: string, statusCode: number, durationMs: number): void;
    addQueueDepths?(source: () => QueueDepth[] | Promise<QueueDepth[]>): void;
  };
  logger: { warn(fields: object, message: string): void };
  maxStreamMs?: number;
  asyncIntake?: (req: IncomingMessage, res: ServerResponse) => void;
}): FunctionProxy {
  const { metrics, logger } = options;
  const proxy = new FunctionProxy({
    routes: options.routes,
    ...(options.maxStreamMs ? { maxStreamMs: options.maxStreamMs } : {}),
    ...(options.asyncIntake ? { asyncIntake: options.asyncIntake } : {}),
    onResponse: (ns, name, status, ms) => metrics.proxyResponse(ns, name, status, ms),
    onUpstreamError: (fn, message) => logger.warn({ function: fn, err: message }, 'upstream failed'),
  });
  metrics.addQueueDepths?.(() => proxy.queueDepths());
  return proxy;
}

const FN_PATH = /^\/fn\/([^/?#]*)\/([^/?#]*)(.*)$/s;

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS';

/** Kept-alive upstream connections, the same over TCP and over a function's unix socket. */
const UPSTREAM_OPTIONS = {
  keepAliveTimeout: 30_000,
  keepAliveMaxTimeout: 60_000,
  connections: 256,
  pipelining: 1,
} as const;

export class FunctionProxy {
  private readonly options: FunctionProxyOptions;
  private readonly agent = new Agent(UPSTREAM_OPTIONS);
  /**
   * Per function with a concurrency limit, while it has requests in flight or queued; the thread's
   * WebSocket upgrades pass the same gates (UpgradeProxyOptions.admissions).
   */
  readonly admissions = new AdmissionGates();

  /**
   * One pool per unix socket (a sandboxed local function), dropped once its socket is gone. A pool
   * serves one origin, so requests skip the agent's lookup by origin.
   */
  private readonly socketPools = new Map<string, Pool>();

  /**
   * Per origin that fronts every revision (a Service's address): the pool of the revision it serves
   * and of the one before. A kept-alive connection stays with the pod it was opened to, so through
   * one shared pool the replaced pod kept answering until it stopped listening, its preStop sleep
   * and more after the new revision was serving. New connections reach the new pods; the previous
   * pool stays open for requests that resolved the route just before it changed, and is closed
   * (after its requests end) when a third revision arrives.
   */
  private readonly revisionPools = new Map<
    string,
    { revision: string; pool: Pool; previous?: { revision: string; pool: Pool; until: number } }
  >();

  constructor(options: FunctionProxyOptions) {
    this.options = options;
    void keepTickObjectShapes();
  }

  private readonly dispatcherFor = (route: ReadyRoute, origin: string): Dispatcher =>
    this.upstreamFor(origin, route.socketPath, route.revision);

  private upstreamFor(origin: string, socketPath?: string, revision?: string): Dispatcher {
    if (!socketPath && revision !== undefined) return this.revisionPool(origin, revision);
    if (!socketPath) return this.agent;
    let pool = this.socketPools.get(socketPath);
    if (!pool) {
      for (const [path, idle] of this.socketPools)
        if (!existsSync(path)) {
          this.socketPools.delete(path);
          void idle.close();
        }
      // The top-level option, not connect.socketPath: that one measured 3-5x slower here.
      pool = new Pool(origin, { ...UPSTREAM_OPTIONS, socketPath });
      this.socketPools.set(socketPath, pool);
    }
    return pool;
  }

  private revisionPool(origin: string, revision: string): Pool {
    const known = this.revisionPools.get(origin);
    if (known?.revision === revision) return known.pool;
    if (known?.previous?.revision === revision && Date.now() < known.previous.until)
      return known.previous.pool;
    // close() lets its requests finish first; nothing else holds the pool once it leaves the map.
    if (known?.previous) known.previous.pool.close().catch(() => {});
    if (!known && this.revisionPools.size >= 10_000) {
      // Origins of deleted functions are never asked for again: start over rather than grow.
      for (const old of this.revisionPools.values()) this.closePool(old).catch(() => {});
      this.revisionPools.clear();
    }
    const pool = new Pool(origin, UPSTREAM_OPTIONS);
    this.revisionPools.set(origin, {
      revision,
      pool,
      ...(known
        ? {
            previous: {
              revision: known.revision,
              pool: known.pool,
              until: Date.now() + (this.options.previousRevisionGraceMs ?? 5000),
            },
          }
        : {}),
    });
    return pool;
  }

  private async closePool(pools: { pool: Pool; previous?: { pool: Pool } }): Promise<void> {
    await Promise.all([pools.pool.close(), pools.previous?.pool.close()]);
  }

  /** The functions with requests queued here now; a function absent has none. */
  queueDepths(): QueueDepth[] {
    return this.admissions.queueDepths();
  }

  static matches(url: string | undefined): boolean {
    return url?.startsWith('/fn/') ?? false;
  }

  async close(): Promise<void> {
    await Promise.all([
      this.agent.close(),
      ...[...this.socketPools.values()].map((pool) => pool.close()),
      ...[...this.revisionPools.values()].map((pool) => this.closePool(pool)),
    ]);
    this.socketPools.clear();
    this.revisionPools.clear();
  }

  /** Never rejects: it runs outside fastify's error handling, where a rejection would be unhandled. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return this.forward(req, res).catch((error: Error) => {
      this.options.onUpstreamError?.(req.url ?? '', error.message);
      sendJson(res, 503, { error: 'function routing is unavailable; try again' }, { 'retry-after': '1' });
    });
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const rawUrl = req.url ?? '/';
    const match = FN_PATH.exec(rawUrl);
    const ns = match?.[1] ?? '';
    // `name@commit` or `name@label` names one kept revision; the platform resolves the whole segment.
    const segment = match?.[2] ?? '';
    const parsed = parseFunctionSegment(segment);
    const name = parsed?.name ?? segment;
    const rest = match?.[3] ?? '';
    const finish = (status: number) =>
      this.options.onResponse?.(ns, name, status, performance.now() - started);
    if (!match || !isDnsLabel(ns) || !parsed || (rest !== '' && !/^[/?]/.test(rest))) {
      finish(404);
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${segment}` });
      return;
    }
    const queue = this.options.asyncIntake ?? this.options.elsewhere;
    if (queue && rawPrefersAsync(req.rawHeaders)) {
      queue(req, res);
      return;
    }
    const route = await this.options.routes.resolve(ns, segment);
    if (route.state === 'unknown' && this.options.elsewhere) {
      this.options.elsewhere(req, res);
      return;
    }
    if (route.state === 'unknown') {
      finish(404);
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${segment}` });
      return;
    }
    if (route.state === 'unavailable') {
      finish(route.status);
      req.resume();
      sendJson(
        res,
        route.status,
        { error: route.message },
        route.status === 404 ? {} : { 'retry-after': '1' },
      );
      return;
    }
    const path = rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
    // A revision that is judged by its answers (a canary's) counts each one, with its latency.
    const observe = route.observe;
    const counted = observe
      ? (status: number) => {
          finish(status);
          observe(status, performance.now() - started);
        }
      : finish;
    const exchange = new UpstreamExchange(this.options, this.dispatcherFor, req, res, {
      ns,
      name: segment,
      path,
      headers: forwardedHeaders(req, `/fn/${ns}/${segment}`),
      started,
      finish: counted,
    });
    if (route.admission) this.admit(ns, segment, route, route.admission, req, res, counted, exchange);
    else exchange.send(route);
  }

  /**
   * Sends the request once the function's gate admits it: at once below its limit, after the
   * requests queued before it otherwise, or never (a 503 now) when its queue is full. The slot is
   * held until the response closes, however it ends, so a retry to a newer revision keeps it.
   */
  private admit(
    ns: string,
    name: string,
    route: ReadyRoute,
    limits: AdmissionLimits,
    req: IncomingMessage,
    res: ServerResponse,
    finish: (status: number) => void,
    exchange: UpstreamExchange,
  ): void {
    this.admissions.admit(ns, name, limits, route.timeoutSec * 1000, res, {
      start: () => exchange.send(route),
      left: () => route.release?.(),
      turnAway: (message) => {
        route.release?.();
        finish(503);
        req.resume();
        sendJson(res, 503, { error: message }, { 'retry-after': '1' });
      },
    });
  }
}

/** Unique per process: a random start and a counter, a fraction of a random UUID's cost per request. */
const REQUEST_ID_PREFIX = randomBytes(6).toString('hex');
let requestCount = 0;

/**
 * The request's headers as the function gets them: hop-by-hop ones stripped, Host passed on as
 * X-Forwarded-Host, the client's address appended to X-Forwarded-For, X-Forwarded-Proto and
 * X-Forwarded-Prefix set, and an X-Request-Id unless the client sent one.
 */
export function forwardedHeaders(req: IncomingMessage, prefix: string): string[] {
  const headers = stripHopByHopRaw(req.rawHeaders);
  let host: string | undefined;
  let forwardedFor = '';
  let hasRequestId = false;
  let kept = 0;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    const value = headers[i + 1] as string;
    if (name === 'host') {
      host ??= value;
      continue;
    }
    if (name === 'x-forwarded-for') {
      forwardedFor = forwardedFor ? `${forwardedFor}, ${value}` : value;
      continue;
    }
    // sless's own hop between its threads: never the client's to set, nor the function's to see.
    if (name === RELAYED_CLIENT_ADDRESS) continue;
    if (name === 'x-request-id') {
      if (value === '') continue;
      hasRequestId = true;
    }
    headers[kept++] = name;
    headers[kept++] = value;
  }
  headers.length = kept;
  const peer = clientAddressOf(req);
  headers.push(
    'x-forwarded-host',
    host ?? '',
    'x-forwarded-proto',
    'encrypted' in req.socket ? 'https' : 'http',
    'x-forwarded-for',
    forwardedFor && peer ? `${forwardedFor}, ${peer}` : forwardedFor || peer,
    'x-forwarded-prefix',
    prefix,
  );
  if (!hasRequestId) headers.push('x-request-id', `${REQUEST_ID_PREFIX}-${(++requestCount).toString(36)}`);
  return headers;
}

interface ExchangeRequest {
  ns: string;
  name: string;
  path: string;
  headers: string[];
  /** performance.now() when the request arrived. */
  started: number;
  /** Counts the answer (metrics), once. */
  finish: (status: number) => void;
}

type ReadyRoute = Extract<RouteState, { state: 'ready' }>;

/**
 * One proxied request: undici's parser callbacks write the function's answer straight into the
 * response. The `request()` API put a Readable stream, a promise and three listeners between the two,
 * a third of the proxy's own cost per request.
 */
class UpstreamExchange implements Dispatcher.DispatchHandler {
  private route: ReadyRoute | undefined;
  /** The instance the route's picker gave this request, told back when the request ends. */
  private picked: string | undefined;
  private released = false;
  private controller: Dispatcher.DispatchController | undefined;
  /** The answer's status line and headers went out: failures from now on can only cut it short. */
  private answering = false;
  private finished = false;
  private retried = false;
  private readonly hasBody: boolean;
  /** Cuts a streamed answer at the maximum stream duration. */
  private streamTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: FunctionProxyOptions,
    private readonly dispatcherFor: (route: ReadyRoute, origin: string) => Dispatcher,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly request: ExchangeRequest,
  ) {
    this.hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  }

  send(route: ReadyRoute): void {
    this.route = route;
    this.released = false;
    // Picked as the request is sent, after any wait for admission: by the counts of this moment.
    this.picked = route.endpoints?.acquire();
    const origin = this.picked ?? route.origin;
    const timeoutMs = route.timeoutSec * 1000 + 1000;
    this.dispatcherFor(route, origin).dispatch(
      {
        origin,
        path: this.request.path,
        method: (this.req.method ?? 'GET') as Method,
        headers: this.request.headers,
        body: this.hasBody ? this.req : undefined,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      },
      this,
    );
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx informational answers are the function's business with this hop only.
    if (statusCode < 200) return;
    const answer = stripHopByHop(headers);
    // An answer before the client's body was read (a function's 413): the connection ends with it
    // (the listener's lingering close reads what the client still sends, for a bounded time).
    if (!this.req.complete) answer.connection = 'close';
    // A streamed answer's headers go out now, not with its first chunk, which may be a while.
    const streamed = isStreamed(headers) && this.req.method !== 'HEAD';
    if (streamed) streamHeaders(answer);
    this.res.writeHead(statusCode, answer);
    if (streamed)
      this.streamTimer = startStream(this.res, this.options.maxStreamMs ?? DEFAULT_MAX_STREAM_MS, () =>
        controller.abort(new Error('the stream reached its maximum duration')),
      );
    this.answering = true;
    this.request.finish(statusCode);
    if (this.res.destroyed) controller.abort(new Error('client closed the connection'));
    // `on`, not `once`: 'close' comes once per response anyway, and once() wraps every listener.
    else this.res.on('close', this.clientGone);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    writeUpstreamChunk(this.res, controller, chunk);
  }

  onResponseEnd(): void {
    this.finished = true;
    clearTimeout(this.streamTimer);
    if (!this.req.complete) this.req.resume();
    this.res.end();
    this.release();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const { ns, name } = this.request;
    clearTimeout(this.streamTimer);
    if (this.answering || this.res.destroyed) {
      this.finished = true;
      this.release();
      this.res.destroy(error);
      return;
    }
    // A kept-alive connection that the old revision closed while it drained fails before any
    // response byte; a request without a body may be sent again (as nginx's proxy_next_upstream
    // does), to whatever the route serves now.
    if (!this.hasBody && !this.retried && isConnectionDropped(error)) {
      this.retried = true;
      void this.retry(error);
      return;
    }
    this.finished = true;
    this.release();
    if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
      this.request.finish(504);
      sendJson(this.res, 504, {
        error: `function ${ns}/${name} timed out after ${this.route?.timeoutSec}s`,
      });
      return;
    }
    this.options.onUpstreamError?.(`${ns}/${name}`, error.message);
    this.request.finish(502);
    // A function that closed while its body was still coming (EPIPE): the rest of the body is not
    // read here either, so the connection ends with the answer.
    const close: Record<string, string> = this.req.complete ? {} : { connection: 'close' };
    if (!this.req.complete) this.req.resume();
    sendJson(this.res, 502, { error: `function ${ns}/${name} is unreachable: ${error.message}` }, close);
  }

  private async retry(error: Error): Promise<void> {
    let again: RouteState;
    try {
      again = await this.options.routes.resolve(this.request.ns, this.request.name);
    } catch {
      again = { state: 'unknown' };
    }
    if (again.state !== 'ready') {
      // The request has no body and nothing was answered: it can go where unknown routes go (a
      // function parked meanwhile wakes there). One that is unavailable now (it crashed under this
      // request) gets the upstream's failure, not the answer a new request would get.
      if (again.state === 'unknown' && this.options.elsewhere) {
        this.release();
        this.finished = true;
        this.options.elsewhere(this.req, this.res);
        return;
      }
      this.onResponseError(this.controller as Dispatcher.DispatchController, error);
      return;
    }
    this.release();
    this.send(again);
  }

  /** The client left before the answer was complete: stop the upstream request too. */
  private readonly clientGone = (): void => {
    if (!this.finished) this.controller?.abort(new Error('client closed the connection'));
  };

  private release(): void {
    if (this.released) return;
    this.released = true;
    if (this.picked !== undefined) this.route?.endpoints?.release(this.picked);
    this.route?.release?.();
  }
}

const DROPPED_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'UND_ERR_SOCKET']);

function isConnectionDropped(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && DROPPED_CONNECTION_CODES.has(code);
}
