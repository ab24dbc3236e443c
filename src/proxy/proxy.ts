import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, errors as undiciErrors } from 'undici';
import type { RouteResolver } from '../core/interfaces.js';
import { isDnsLabel } from '../core/naming.js';
import { stripHopByHop } from './hop-by-hop.js';

export interface ProxyOptions {
  routes: RouteResolver;
  /** Called once per proxied request, for metrics. */
  onResponse?: (namespace: string, name: string, statusCode: number, durationMs: number) => void;
}

interface FnParams {
  ns: string;
  name: string;
  '*'?: string;
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/**
 * `ANY /fn/{ns}/{name}/*`: streams the request to the function's ready revision over kept-alive
 * connections and streams the answer back, with hop-by-hop headers stripped both ways. The
 * function's timeout bounds the wait for response headers (504 after it).
 */
export async function proxyPlugin(app: FastifyInstance, options: ProxyOptions): Promise<void> {
  const agent = new Agent({
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 60_000,
    connections: 256,
    pipelining: 1,
  });
  app.addHook('onClose', async () => {
    await agent.close();
  });

  // Bodies are streamed through untouched, whatever their type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  const handler = async (request: FastifyRequest<{ Params: FnParams }>, reply: FastifyReply) => {
    const started = performance.now();
    const { ns, name } = request.params;
    const finish = (status: number) => options.onResponse?.(ns, name, status, performance.now() - started);
    if (!isDnsLabel(ns) || !isDnsLabel(name)) {
      finish(404);
      return reply.code(404).send({ error: `unknown function ${ns}/${name}` });
    }
    const route = await options.routes.resolve(ns, name);
    if (route.state === 'unknown') {
      finish(404);
      return reply.code(404).send({ error: `unknown function ${ns}/${name}` });
    }
    if (route.state === 'unavailable') {
      finish(route.status);
      return reply.code(route.status).header('retry-after', '1').send({ error: route.message });
    }
    const rawUrl = request.raw.url ?? '/';
    const prefix = `/fn/${ns}/${name}`;
    const rest = rawUrl.slice(prefix.length);
    const path = rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
    const headers = stripHopByHop(request.headers);
    delete headers.host;
    headers['x-forwarded-host'] = request.headers.host ?? '';
    headers['x-forwarded-proto'] = request.protocol;
    headers['x-forwarded-for'] = [request.headers['x-forwarded-for'], request.ip].filter(Boolean).join(', ');
    headers['x-forwarded-prefix'] = prefix;
    if (!headers['x-request-id']) headers['x-request-id'] = randomUUID();
    const timeoutMs = route.timeoutSec * 1000 + 1000;
    const hasBody = request.method !== 'GET' && request.method !== 'HEAD';
    let released = false;
    const release = () => {
      if (!released) {
        released = true;
        route.release?.();
      }
    };
    try {
      const upstream = await agent.request({
        origin: route.origin,
        path,
        method: request.method as (typeof METHODS)[number],
        headers,
        body: hasBody ? (request.body as Readable | undefined) : undefined,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const responseHeaders = stripHopByHop(upstream.headers as Record<string, string | string[]>);
      delete responseHeaders['content-length'];
      if (upstream.headers['content-length'] !== undefined)
        responseHeaders['content-length'] = String(upstream.headers['content-length']);
      upstream.body.once('close', release);
      upstream.body.once('error', release);
      finish(upstream.statusCode);
      return reply.code(upstream.statusCode).headers(responseHeaders).send(upstream.body);
    } catch (error) {
      release();
      if (
        error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError
      ) {
        finish(504);
        return reply.code(504).send({ error: `function ${ns}/${name} timed out after ${route.timeoutSec}s` });
      }
      request.log.warn({ err: (error as Error).message, function: `${ns}/${name}` }, 'upstream failed');
      finish(502);
      return reply
        .code(502)
        .send({ error: `function ${ns}/${name} is unreachable: ${(error as Error).message}` });
    }
  };

  for (const url of ['/fn/:ns/:name', '/fn/:ns/:name/*']) {
    app.route({ method: [...METHODS], url, handler });
  }
}
