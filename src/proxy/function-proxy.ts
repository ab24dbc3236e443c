import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, errors as undiciErrors } from 'undici';
import type { RouteResolver } from '../core/interfaces.js';
import { isDnsLabel } from '../core/naming.js';
import { stripHopByHop } from './hop-by-hop.js';

export interface FunctionProxyOptions {
  routes: RouteResolver;
  /** Called once per proxied request, for metrics. */
  onResponse?: (namespace: string, name: string, statusCode: number, durationMs: number) => void;
  onUpstreamError?: (functionKey: string, message: string) => void;
}

/** The proxy as both platforms serve it: responses counted in metrics, upstream failures logged. */
export function observedFunctionProxy(options: {
  routes: RouteResolver;
  metrics: { proxyResponse(namespace: string, name: string, statusCode: number, durationMs: number): void };
  logger: { warn(fields: object, message: string): void };
}): FunctionProxy {
  const { metrics, logger } = options;
  return new FunctionProxy({
    routes: options.routes,
    onResponse: (ns, name, status, ms) => metrics.proxyResponse(ns, name, status, ms),
    onUpstreamError: (fn, message) => logger.warn({ function: fn, err: message }, 'upstream failed'),
  });
}

const FN_PATH = /^\/fn\/([^/?#]*)\/([^/?#]*)(.*)$/s;

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS';

function sendJson(
  res: ServerResponse,
  status: number,
  body: { error: string },
  extra: Record<string, string> = {},
) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...extra,
  });
  res.end(payload);
}

/**
 * `ANY /fn/{ns}/{name}/*` on plain node:http objects: streams the request to the function's ready
 * revision over kept-alive connections and streams the answer back, with hop-by-hop headers stripped
 * both ways; the function's timeout bounds the wait (504 after it). It works below fastify so that
 * the hot path pays for no routing, hooks or reply machinery; fastify's /fn/ routes call it too.
 */
/** Kept-alive upstream connections, the same over TCP and over a function's unix socket. */
const UPSTREAM_AGENT_OPTIONS = {
  keepAliveTimeout: 30_000,
  keepAliveMaxTimeout: 60_000,
  connections: 256,
  pipelining: 1,
} as const;

export class FunctionProxy {
  private readonly options: FunctionProxyOptions;
  private readonly agent = new Agent(UPSTREAM_AGENT_OPTIONS);

  /** One agent per unix socket (a sandboxed local function), dropped once its socket is gone. */
  private readonly socketAgents = new Map<string, Agent>();

  /**
   * Per origin that fronts every revision (a Service's address): the agent of the revision it serves
   * and of the one before. A kept-alive connection stays with the pod it was opened to, so through
   * one shared agent the replaced pod kept answering until it stopped listening, its preStop sleep
   * and more after the new revision was serving. New connections reach the new pods; the previous
   * agent stays open for requests that resolved the route just before it changed, and is closed
   * (after its requests end) when a third revision arrives.
   */
  private readonly revisionAgents = new Map<
    string,
    { revision: string; agent: Agent; previous?: { revision: string; agent: Agent } }
  >();

  constructor(options: FunctionProxyOptions) {
    this.options = options;
  }

  private agentFor(target: { origin: string; socketPath?: string; revision?: string }): Agent {
    const { socketPath, revision } = target;
    if (!socketPath && revision !== undefined) return this.revisionAgent(target.origin, revision);
    if (!socketPath) return this.agent;
    let agent = this.socketAgents.get(socketPath);
    if (!agent) {
      for (const [path, idle] of this.socketAgents)
        if (!existsSync(path)) {
          this.socketAgents.delete(path);
          void idle.close();
        }
      // The top-level option, not connect.socketPath: that one measured 3-5x slower here.
      agent = new Agent({ ...UPSTREAM_AGENT_OPTIONS, socketPath });
      this.socketAgents.set(socketPath, agent);
    }
    return agent;
  }

  private revisionAgent(origin: string, revision: string): Agent {
    const pool = this.revisionAgents.get(origin);
    if (pool?.revision === revision) return pool.agent;
    if (pool?.previous?.revision === revision) return pool.previous.agent;
    // close() lets its requests finish first; nothing else holds the agent once it leaves the map.
    if (pool?.previous) pool.previous.agent.close().catch(() => {});
    if (!pool && this.revisionAgents.size >= 10_000) {
      // Origins of deleted functions are never asked for again: start over rather than grow.
      for (const old of this.revisionAgents.values()) this.closePool(old).catch(() => {});
      this.revisionAgents.clear();
    }
    const agent = new Agent(UPSTREAM_AGENT_OPTIONS);
    this.revisionAgents.set(origin, {
      revision,
      agent,
      ...(pool ? { previous: { revision: pool.revision, agent: pool.agent } } : {}),
    });
    return agent;
  }

  private async closePool(pool: { agent: Agent; previous?: { agent: Agent } }): Promise<void> {
    await Promise.all([pool.agent.close(), pool.previous?.agent.close()]);
  }

  static matches(url: string | undefined): boolean {
    return url?.startsWith('/fn/') ?? false;
  }

  async close(): Promise<void> {
    await Promise.all([
      this.agent.close(),
      ...[...this.socketAgents.values()].map((agent) => agent.close()),
      ...[...this.revisionAgents.values()].map((pool) => this.closePool(pool)),
    ]);
    this.socketAgents.clear();
    this.revisionAgents.clear();
  }

  /** Never rejects: it runs outside fastify's error handling, where a rejection would be unhandled. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.forward(req, res);
    } catch (error) {
      this.options.onUpstreamError?.(req.url ?? '', (error as Error).message);
      sendJson(res, 503, { error: 'function routing is unavailable; try again' }, { 'retry-after': '1' });
    }
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const rawUrl = req.url ?? '/';
    const match = FN_PATH.exec(rawUrl);
    const ns = match?.[1] ?? '';
    const name = match?.[2] ?? '';
    const rest = match?.[3] ?? '';
    const finish = (status: number) =>
      this.options.onResponse?.(ns, name, status, performance.now() - started);
    if (!match || !isDnsLabel(ns) || !isDnsLabel(name) || (rest !== '' && !/^[/?]/.test(rest))) {
      finish(404);
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${name}` });
      return;
    }
    const route = await this.options.routes.resolve(ns, name);
    if (route.state === 'unknown') {
      finish(404);
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${name}` });
      return;
    }
    if (route.state === 'unavailable') {
      finish(route.status);
      req.resume();
      sendJson(res, route.status, { error: route.message }, { 'retry-after': '1' });
      return;
    }
    const prefix = `/fn/${ns}/${name}`;
    const path = rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
    const headers = stripHopByHop(req.headers);
    delete headers.host;
    headers['x-forwarded-host'] = req.headers.host ?? '';
    headers['x-forwarded-proto'] = 'encrypted' in req.socket ? 'https' : 'http';
    const peer = req.socket.remoteAddress ?? '';
    const forwardedFor = req.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = forwardedFor && peer ? `${forwardedFor}, ${peer}` : forwardedFor || peer;
    headers['x-forwarded-prefix'] = prefix;
    if (!headers['x-request-id']) headers['x-request-id'] = randomUUID();
    const timeoutMs = route.timeoutSec * 1000 + 1000;
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    let released = false;
    let current = route;
    const release = () => {
      if (!released) {
        released = true;
        current.release?.();
      }
    };
    const send = (target: typeof route) =>
      this.agentFor(target).request({
        origin: target.origin,
        path,
        method: (req.method ?? 'GET') as Method,
        headers,
        body: hasBody ? req : undefined,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    try {
      let upstream: Awaited<ReturnType<typeof send>>;
      try {
        upstream = await send(route);
      } catch (error) {
        // A kept-alive connection that the old revision closed while it drained fails before any
        // response byte; a request without a body may be sent again (as nginx's
        // proxy_next_upstream does), to whatever the route serves now.
        if (hasBody || !isConnectionDropped(error)) throw error;
        const again = await this.options.routes.resolve(ns, name);
        if (again.state !== 'ready') throw error;
        release();
        released = false;
        current = again;
        upstream = await send(again);
      }
      const responseHeaders = stripHopByHop(upstream.headers as Record<string, string | string[]>);
      finish(upstream.statusCode);
      res.writeHead(upstream.statusCode, responseHeaders);
      upstream.body.once('close', release);
      upstream.body.once('error', (error) => res.destroy(error));
      res.once('close', () => {
        if (!upstream.body.readableEnded) upstream.body.destroy();
      });
      upstream.body.pipe(res);
    } catch (error) {
      release();
      if (
        error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError
      ) {
        finish(504);
        sendJson(res, 504, { error: `function ${ns}/${name} timed out after ${route.timeoutSec}s` });
        return;
      }
      const message = (error as Error).message;
      this.options.onUpstreamError?.(`${ns}/${name}`, message);
      finish(502);
      sendJson(res, 502, { error: `function ${ns}/${name} is unreachable: ${message}` });
    }
  }
}

const DROPPED_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'UND_ERR_SOCKET']);

function isConnectionDropped(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && DROPPED_CONNECTION_CODES.has(code);
}
