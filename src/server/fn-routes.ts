/**
 * The /fn/ routes as fastify sees them. A real server hands /fn/ to the function proxy before
 * fastify runs; these routes serve app.inject and anything else that reaches fastify, so both ways
 * end in the same FunctionProxy.
 */
import type { FastifyInstance } from 'fastify';
import type { FunctionProxy } from '../proxy/function-proxy.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

/**
 * The /fn/ routes inside fastify. A real server hands /fn/ requests to the proxy before fastify sees
 * them (see buildApp's serverFactory); these routes serve app.inject and anything that reaches
 * fastify anyway, through the same FunctionProxy.
 */
export async function proxyPlugin(app: FastifyInstance, options: { proxy: FunctionProxy }): Promise<void> {
  // Bodies are streamed through untouched, whatever their type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  for (const url of ['/fn/:ns/:name', '/fn/:ns/:name/*']) {
    app.route({
      method: METHODS,
      url,
      handler: async (request, reply) => {
        reply.hijack();
        await options.proxy.handle(request.raw, reply.raw);
      },
    });
  }
}
