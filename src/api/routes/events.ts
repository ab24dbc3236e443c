/**
 * `GET /v1/namespaces/{ns}/events`: what changes in one namespace, pushed as Server-Sent Events, so a
 * dashboard follows status without polling. Every object write the store sees (spec and status, on
 * either platform: the memory store's own events, the kube store's watches) becomes a `change`
 * event carrying the object as `GET` would answer it; each build the history records becomes a
 * `build` event. The first event, `hello`, says the stream is live: a reader that lists after it
 * misses nothing.
 */
import type { FastifyInstance } from 'fastify';
import type { StoreEvent } from '../../core/interfaces.js';
import type { ApiContext } from '../context.js';
import { EventStream } from '../event-stream.js';
import { errorResponses, nsParams } from '../schemas.js';
import type { NsParams } from './common.js';

export interface EventRouteOptions {
  context: ApiContext;
  heartbeatMs?: number;
  /** Aborted when sless begins to stop: every stream ends then, and no new one starts. */
  stopping?: AbortSignal;
}

export async function eventRoutes(app: FastifyInstance, options: EventRouteOptions): Promise<void> {
  const { context } = options;
  const open = new Set<EventStream>();
  // Streams never end by themselves: a stopping server ends them, or it would wait for their readers.
  const endAll = () => {
    for (const stream of open) stream.close();
  };
  options.stopping?.addEventListener('abort', endAll, { once: true });
  app.addHook('preClose', async () => endAll());

  app.get<{ Params: NsParams }>(
    '/v1/namespaces/:ns/events',
    {
      schema: {
        summary: 'Changes in the namespace as Server-Sent Events (`hello`, then `change` and `build`)',
        description:
          '`change` data is `{type: ADDED|MODIFIED|DELETED, kind, name, object}`, the object as GET returns it; `build` data is `{name, build}`, a build record as `…/functions/{name}/builds` lists it.',
        tags: ['events'],
        params: nsParams,
        response: { ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const { ns } = request.params;
      reply.hijack();
      const stream = new EventStream(reply.raw, {
        ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
      });
      open.add(stream);
      const unsubscribe = [
        context.store.subscribe((event: StoreEvent) => {
          if (event.object.metadata.namespace !== ns) return;
          stream.send('change', {
            type: event.type,
            kind: event.object.kind,
            name: event.object.metadata.name,
            object: event.object,
          });
        }),
        context.onBuildRecorded?.((namespace, name, build) => {
          if (namespace === ns) stream.send('build', { name, build });
        }),
      ];
      stream.onClose(() => {
        open.delete(stream);
        for (const stop of unsubscribe) stop?.();
      });
      stream.send('hello', { namespace: ns });
      if (options.stopping?.aborted) stream.close();
    },
  );
}
