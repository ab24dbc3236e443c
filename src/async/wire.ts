/**
 * Asynchronous invocation as one subsystem, the same on either platform given an InvocationStore:
 * the intake (the 202), the workers, the callback sender and what the API reads. main.ts wires it.
 */
import type { Logger } from 'pino';
import type { InvocationsApi } from '../api/routes/invocations.js';
import { timeoutSecOf } from '../core/defaults.js';
import type { InvocationStore, ObjectStore } from '../core/interfaces.js';
import { ASYNC_DEFAULTS } from '../core/invocations.js';
import type { OutboundPolicy } from '../source/outbound.js';
import { CallbackSender, checkCallbackUrl } from './callback.js';
import { FunctionEndpointDelivery } from './delivery.js';
import { AsyncDispatcher, type AsyncSettings } from './dispatcher.js';
import { AsyncIntake } from './intake.js';

export interface AsyncInvocations {
  intake: AsyncIntake;
  dispatcher: AsyncDispatcher;
  api: InvocationsApi;
  /** Resumes the stored invocations; `origin` is where this sless's /fn/ answers. */
  start(origin: string): Promise<void>;
  stop(): Promise<void>;
}

/** The function's async settings, spec.async's defaults filled in; undefined when it does not exist. */
export async function asyncSettings(
  store: ObjectStore,
  namespace: string,
  name: string,
): Promise<AsyncSettings | undefined> {
  const fn = await store.get('Function', namespace, name);
  if (!fn) return undefined;
  const spec = fn.spec.async ?? {};
  return {
    timeoutSec: timeoutSecOf(fn),
    maxAttempts: spec.maxAttempts ?? ASYNC_DEFAULTS.maxAttempts,
    backoffMs: spec.backoffMs ?? ASYNC_DEFAULTS.backoffMs,
    concurrency: spec.concurrency ?? ASYNC_DEFAULTS.concurrency,
  };
}

export function wireAsyncInvocations(deps: {
  store: ObjectStore;
  invocations: InvocationStore;
  policy: OutboundPolicy;
  logger: Logger;
  /** Attempts in flight at once over every function. */
  concurrency?: number;
}): AsyncInvocations {
  let origin: string | undefined;
  const delivery = new FunctionEndpointDelivery(() => origin);
  const callbacks = new CallbackSender(deps.policy);
  const settings = (ns: string, name: string) => asyncSettings(deps.store, ns, name);
  const dispatcher = new AsyncDispatcher({
    store: deps.invocations,
    logger: deps.logger,
    settings,
    deliver: delivery.deliver,
    callback: callbacks.send,
    ...(deps.concurrency ? { concurrency: deps.concurrency } : {}),
  });
  const intake = new AsyncIntake({
    dispatcher,
    settings,
    checkCallback: (url) => checkCallbackUrl(deps.policy, url),
  });
  return {
    intake,
    dispatcher,
    api: {
      get: (ns, id) => deps.invocations.get(ns, id),
      list: (ns, options) => deps.invocations.list(ns, options),
      replay: (ns, id) => dispatcher.replay(ns, id),
    },
    async start(listening) {
      // A wildcard bind answers on loopback too; the workers call it there.
      origin = listening.replace('//0.0.0.0', '//127.0.0.1').replace('//[::]', '//[::1]');
      await dispatcher.start();
    },
    async stop() {
      await dispatcher.stop();
      await Promise.all([delivery.close(), callbacks.close()]);
      await deps.invocations.close();
    },
  };
}
