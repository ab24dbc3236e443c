/**
 * The /fn/ routes as fastify sees them. A real server hands /fn/ to the function proxy before
 * fastify runs; these routes serve app.inject and anything else that reaches fastify, so both ways
 * end in the same FunctionProxy.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { FunctionProxy } from '../proxy/function-proxy.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

type RawHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * `{base}/:ns/:name` and everything below it, handed to `handle` on the raw request and response:
 * bodies pass through untouched, whatever their type, and fastify sends nothing of its own.
 */
export async function rawFunctionRoutes(
  app: FastifyInstance,
  options: { base: string; methods?: string[]; handle: RawHandler },
): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  for (const url of [`${options.base}/:ns/:name`, `${options.base}/:ns/:name/*`]) {
    app.route({
      method: options.methods ?? METHODS,
      url,
      handler: async (request, reply) => {
        reply.hijack();
        await options.handle(request.raw, reply.raw);
      },
    });
  }
}

/**
 * The /fn/ routes inside fastify. A real server hands /fn/ requests to the proxy before fastify sees
 * them (see buildApp's serverFactory); these routes serve app.inject and anything that reaches
 * fastify anyway, through the same FunctionProxy.
 */
export async function proxyPlugin(app: FastifyInstance, options: { proxy: FunctionProxy }): Promise<void> {
  await rawFunctionRoutes(app, { base: '/fn', handle: (req, res) => options.proxy.handle(req, res) });
}
