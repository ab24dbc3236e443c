/**
 * Asynchronous invocations and amqp Triggers on kube, wired. The invocation store (a RabbitMQ stream)
 * is open on every replica, which answers reads from it; the workers run only on the leader, one
 * fresh dispatcher per term that starts once the stream is read to its end, so a new leader resumes
 * whatever the last one left (an attempt it had in flight is sent again). A follower hands each
 * asynchronous request to the leader as it came; only the leader accepts. The amqp Triggers'
 * consumers belong to the term's control loop too: unacknowledged messages of a replica that stops
 * leading go back to their queue for the next leader.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { FORWARDED_HEADER, forwardToLeader, type LeaderRoute } from '../../../api/leader-forward.js';
import type { InvocationsApi } from '../../../api/routes/invocations.js';
import { CallbackSender, checkCallbackUrl } from '../../../async/callback.js';
import { FunctionEndpointDelivery } from '../../../async/delivery.js';
import { AsyncDispatcher } from '../../../async/dispatcher.js';
import { AsyncIntake } from '../../../async/intake.js';
import { asyncSettings } from '../../../async/wire.js';
import type { AsyncInvocationSettings } from '../../../config/kube.js';
import { UnavailableError } from '../../../core/errors.js';
import type { ObjectStore, TriggerScheduler } from '../../../core/interfaces.js';
import type { LeaderTasks } from '../../../core/leadership.js';
import { QueueTriggers } from '../../../queue/queue-triggers.js';
import type { SecretReader } from '../../../secrets/references.js';
import type { OutboundPolicy } from '../../../source/outbound.js';
import { InvocationStoreUnavailableError, StreamInvocationStore } from '../invocation-store.js';

/** How often the leader writes again the records whose last copy in the stream grows old. */
const REFRESH_EVERY_MS = 6 * 3600_000;
/** Records last written longer ago than this are written again (the stream keeps 7 days). */
const REFRESH_OLDER_THAN_MS = 24 * 3600_000;

export interface KubeAsyncInvocations {
  store: StreamInvocationStore;
  /** The `/fn/` proxy's and the API's intake: the leader's dispatcher, or a hand-off to the leader. */
  intake: { handle(req: IncomingMessage, res: ServerResponse): Promise<void> };
  api: InvocationsApi;
  /** The running dispatcher of this replica's term, for tests; undefined while it does not lead. */
  dispatcher(): AsyncDispatcher | undefined;
  close(): Promise<void>;
}

export async function wireKubeAsyncInvocations(deps: {
  settings: AsyncInvocationSettings;
  store: ObjectStore;
  policy: OutboundPolicy;
  logger: Logger;
  leaderTasks: Pick<LeaderTasks, 'register'>;
  /** The leader's address, for the hand-off; absent without leader election (this replica leads). */
  leader?: LeaderRoute;
  /** Where this replica's /fn/ answers, known once it listens. */
  origin(): string | undefined;
}): Promise<KubeAsyncInvocations> {
  const { logger } = deps;
  const store = await StreamInvocationStore.open({
    url: deps.settings.amqpUrl,
    stream: deps.settings.stream,
    logger,
  });
  const delivery = new FunctionEndpointDelivery(deps.origin);
  const callbacks = new CallbackSender(deps.policy);
  const settings = (ns: string, name: string) => asyncSettings(deps.store, ns, name);
  let current: AsyncDispatcher | undefined;
  deps.leaderTasks.register('async invocations', async () => {
    // Whatever the last leader wrote is read before any of it is resumed.
    await store.caughtUp();
    const dispatcher = new AsyncDispatcher({
      store,
      logger,
      settings,
      deliver: delivery.deliver,
      callback: callbacks.send,
    });
    await dispatcher.start();
    current = dispatcher;
    const refresh = setInterval(() => {
      void store
        .refresh(REFRESH_OLDER_THAN_MS)
        .catch((error: Error) =>
          logger.warn({ err: error.message }, 'invocation records could not be written again'),
        );
    }, REFRESH_EVERY_MS);
    refresh.unref();
    return async () => {
      clearInterval(refresh);
      if (current === dispatcher) current = undefined;
      await dispatcher.stop();
    };
  });
  const intake = new AsyncIntake({
    dispatcher: {
      accept: (input, fnSettings) => {
        if (!current)
          return Promise.reject(
            new InvocationStoreUnavailableError('this replica does not run the invocation workers now'),
          );
        return current.accept(input, fnSettings);
      },
    },
    settings,
    checkCallback: (url) => checkCallbackUrl(deps.policy, url),
  });
  const { leader } = deps;
  return {
    store,
    intake: {
      handle(req, res) {
        // A request a follower forwarded is answered here even if this replica no longer leads
        // (as a 503 then), never sent on again.
        if (leader && !leader.isLeader() && req.headers[FORWARDED_HEADER] === undefined) {
          forwardToLeader(leader, req, res);
          return Promise.resolve();
        }
        return intake.handle(req, res);
      },
    },
    api: {
      get: (ns, id) => store.get(ns, id),
      list: (ns, options) => store.list(ns, options),
      replay: (ns, id) => {
        if (!current)
          return Promise.reject(new UnavailableError('this replica does not run the invocation workers now'));
        return current.replay(ns, id);
      },
    },
    dispatcher: () => current,
    async close() {
      await Promise.all([delivery.close(), callbacks.close()]);
      await store.close();
    },
  };
}

/**
 * The amqp Triggers of leader terms: each term's controller gets a fresh set of consumers
 * (`forTerm`), which stops consuming when the term ends; what was not acknowledged goes back to the
 * queue for the next leader. Stopped before the term's control loop, they refuse what it still
 * applies (see QueueTriggers.stopAll).
 */
export function kubeQueueTriggers(deps: {
  secrets: SecretReader;
  logger: Logger;
  origin(): string | undefined;
  onChanged(namespace: string, name: string): void;
  leaderTasks: Pick<LeaderTasks, 'register'>;
}): { forTerm(): TriggerScheduler } {
  let latest: QueueTriggers | undefined;
  deps.leaderTasks.register('amqp triggers', () => {
    const term = latest;
    return async () => {
      await term?.stopAll();
    };
  });
  return {
    forTerm() {
      latest = new QueueTriggers({
        secrets: deps.secrets,
        logger: deps.logger,
        origin: deps.origin,
        onChanged: deps.onChanged,
      });
      return latest;
    },
  };
}
