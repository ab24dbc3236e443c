/**
 * `GET …/functions/{name}/logs?tail=N&follow=true`: a function's stdout and stderr as NDJSON, one
 * `{time, instance, stream, line}` object per line. With follow the response stays open and streams
 * new lines until the client goes away.
 */
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../core/errors.js';
import type { ApiContext } from '../context.js';
import { errorResponses, nameParams } from '../schemas.js';
import type { NameParams } from './common.js';

const logsQuery = {
  type: 'object',
  properties: {
    tail: { type: 'integer', minimum: 0, maximum: 10000, default: 100 },
    follow: { type: 'boolean', default: false },
  },
} as const;

const logLine = {
  type: 'object',
  required: ['time', 'instance', 'stream', 'line'],
  properties: {
    time: { type: 'string' },
    instance: { type: 'string' },
    stream: { type: 'string', enum: ['stdout', 'stderr', 'output'] },
    line: { type: 'string' },
  },
} as const;

export async function logRoutes(app: FastifyInstance, options: { context: ApiContext }): Promise<void> {
  const { context } = options;
  const logs = context.functionLogs;
  app.get<{ Params: NameParams; Querystring: { tail: number; follow: boolean } }>(
    '/v1/namespaces/:ns/functions/:name/logs',
    {
      schema: {
        summary: 'A function’s stdout and stderr (all replicas), as NDJSON; `follow=true` keeps streaming',
        description:
          'Each line is `{"time","instance","stream","line"}`; `instance` is the pod name on kube. Locally the last 1000 lines per function are kept. `tail` counts per pod on kube.',
        tags: ['functions'],
        params: nameParams,
        querystring: logsQuery,
        response: { 200: logLine, ...errorResponses(400, 401, 403, 404, 502) },
      },
    },
    async (request, reply) => {
      const { ns, name } = request.params;
      const fn = await context.store.get('Function', ns, name);
      if (fn?.kind !== 'Function') throw new NotFoundError(`Function ${ns}/${name} not found`);
      if (!logs) throw new NotFoundError('this platform keeps no function logs');
      const stop = new AbortController();
      const lines = logs.read(ns, name, { ...request.query, signal: stop.signal })[Symbol.asyncIterator]();
      // The first line (or the end) before any byte is sent, so a failure is still a proper error answer.
      const first = request.query.follow ? undefined : await lines.next();
      reply.hijack();
      const out = reply.raw;
      out.on('close', () => stop.abort());
      out.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-store',
      });
      out.flushHeaders();
      try {
        if (first && !first.done) out.write(`${JSON.stringify(first.value)}\n`);
        if (!first?.done) {
          for (let next = await lines.next(); !next.done; next = await lines.next()) {
            if (!out.write(`${JSON.stringify(next.value)}\n`))
              await new Promise<void>((resolve) => {
                out.once('drain', resolve);
                out.once('close', resolve);
              });
            if (stop.signal.aborted) break;
          }
        }
      } catch (error) {
        // Headers are gone: the failure ends the stream as its last line.
        if (!stop.signal.aborted) out.write(`${JSON.stringify({ error: (error as Error).message })}\n`);
        request.log.warn({ function: `${ns}/${name}`, err: (error as Error).message }, 'log stream failed');
      } finally {
        stop.abort();
        await lines.return?.();
        out.end();
      }
    },
  );
}
