/**
 * The git providers' webhook endpoint, the one API route not behind bearer auth: a delivery is
 * trusted only when it is signed with its source's shared secret, and a push to the watched branch
 * starts a sync, so a change goes live without waiting for the next poll.
 */
import type { FastifyInstance } from 'fastify';
import { branchOf } from '../../core/defaults.js';
import { asError, BadRequestError, NotFoundError } from '../../core/errors.js';
import type { ApiContext } from '../context.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import { errorResponses, webhookParams } from '../schemas.js';
import { RecentDeliveries } from './deliveries.js';
import { decide, describeEvent, parsePayload } from './events.js';
import { verifyWebhook } from './signature.js';

export interface WebhookOptions {
  context: ApiContext;
  /** Larger bodies get 413 before any signature work. */
  bodyLimit?: number;
}

interface Params {
  ns: string;
  source: string;
}

const signatureHeaders = {
  type: 'object',
  properties: {
    'x-hub-signature-256': { type: 'string' },
    'x-gitea-signature': { type: 'string' },
    'x-gitlab-token': { type: 'string' },
    'x-sless-signature': { type: 'string' },
    'x-github-event': { type: 'string' },
    'x-gitea-event': { type: 'string' },
    'x-gitlab-event': { type: 'string' },
    'x-github-delivery': { type: 'string' },
    'x-gitea-delivery': { type: 'string' },
    'x-gitlab-event-uuid': { type: 'string' },
  },
} as const;

/**
 * `POST /v1/webhooks/{ns}/{source}`: authenticated by the source's shared secret, not by JWT. It
 * runs in its own encapsulated context so that it alone keeps raw bodies (the HMAC is over the
 * exact bytes). A push to the source's branch answers 202 at once and syncs in the background.
 */
export async function webhookPlugin(app: FastifyInstance, options: WebhookOptions): Promise<void> {
  const { context } = options;
  const deliveries = new RecentDeliveries();
  const bodyLimit = options.bodyLimit ?? 1024 * 1024;

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => done(null, body));

  app.post<{ Params: Params; Body: Buffer | undefined }>(
    '/v1/webhooks/:ns/:source',
    {
      bodyLimit,
      schema: {
        summary: 'Git provider webhook: a push to the source branch triggers a sync',
        tags: ['webhooks'],
        params: webhookParams,
        headers: signatureHeaders,
        response: {
          202: {
            type: 'object',
            properties: {
              status: { type: 'string' },
              reason: { type: 'string' },
              source: { type: 'string' },
            },
          },
          ...errorResponses(400, 401, 403, 404, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { ns, source: name } = request.params;
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const secret = await context.webhookSecret(ns, name);
      if (secret === undefined || secret === '')
        throw new ForbiddenError(`webhooks are not configured for source ${ns}/${name} (no secret)`);
      const verified = verifyWebhook(request.headers, body, secret);
      if (!verified.ok) throw new UnauthorizedError(verified.reason, { scheme: 'webhook' });

      const source = await context.store.get('GitSource', ns, name);
      if (!source) throw new NotFoundError(`GitSource ${ns}/${name} not found`);

      const event = describeEvent(request.headers);
      const payload = parsePayload(body, request.headers['content-type']);
      if (payload === undefined && body.length > 0) throw new BadRequestError('body: is not valid JSON');
      const decision = decide(event, payload, branchOf(source));
      if (event.deliveryId !== undefined && deliveries.checkAndRecord(`${ns}/${name}`, event.deliveryId))
        return reply
          .code(202)
          .send({ status: 'ignored', reason: `delivery ${event.deliveryId} was already handled` });
      if (!decision.sync) return reply.code(202).send({ status: 'ignored', reason: decision.reason });

      request.log.info(
        { source: `${ns}/${name}`, provider: event.provider, delivery: event.deliveryId },
        'webhook: sync',
      );
      // Providers time out after ~10 s; the sync may take longer, so it runs after the answer.
      void context
        .syncNow(ns, name)
        .catch((error: unknown) =>
          request.log.error({ source: `${ns}/${name}`, err: asError(error).message }, 'webhook sync failed'),
        );
      return reply.code(202).send({ status: 'accepted', source: `${ns}/${name}` });
    },
  );
}
