/**
 * `X-Callback-Url`: where an asynchronous invocation's result is posted once it ends. The URL is a
 * tenant's, so it goes through the outbound address guard that source URLs use: checked when the
 * invocation is accepted (a refusal is the client's 400, before anything is stored) and again on the
 * address actually connected to when the result is sent (a name that resolves elsewhere later).
 */
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { BadRequestError } from '../core/errors.js';
import type { InvocationRecord } from '../core/invocations.js';
import type { OutboundPolicy } from '../source/outbound.js';
import { INVOCATION_ID_HEADER } from './delivery.js';

export const CALLBACK_HEADER = 'x-callback-url';

const CALLBACK_TIMEOUT_MS = 10_000;

/** The callback as the client gave it, checked: http(s), and an address the guard lets tenants reach. */
export async function checkCallbackUrl(policy: OutboundPolicy, value: string): Promise<string> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new BadRequestError(`${CALLBACK_HEADER}: "${value.slice(0, 200)}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new BadRequestError(`${CALLBACK_HEADER}: must be an http or https URL, not ${url.protocol}`);
  if (url.username || url.password)
    throw new BadRequestError(`${CALLBACK_HEADER}: must not carry credentials in the URL`);
  try {
    policy.checkHost(url.hostname);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    await promisify(policy.lookup)(host, { all: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new BadRequestError(`${CALLBACK_HEADER}: ${message}`);
  }
  return url.href;
}

/** What the callback receives: the invocation's end, without the request it carried. */
export function callbackPayload(record: InvocationRecord): object {
  return {
    id: record.id,
    namespace: record.namespace,
    function: record.function,
    state: record.state,
    attempts: record.attempts.length,
    ...(record.result ? { result: record.result } : {}),
  };
}

export class CallbackSender {
  private readonly agent: Agent;

  constructor(policy: OutboundPolicy) {
    // Every connection's address is checked after DNS, as source fetches are.
    this.agent = new Agent({ connect: { lookup: policy.lookup }, connections: 16 });
    this.policy = policy;
  }

  private readonly policy: OutboundPolicy;

  /** Posts the result once; never rejects, and follows no redirect (one more place a URL could go). */
  readonly send = async (record: InvocationRecord): Promise<{ status?: number; error?: string }> => {
    const target = record.callback?.url;
    if (!target) return { error: 'no callback URL' };
    try {
      this.policy.checkHost(new URL(target).hostname);
      const response = await request(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [INVOCATION_ID_HEADER]: record.id },
        body: JSON.stringify(callbackPayload(record)),
        dispatcher: this.agent,
        signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
      });
      await response.body.dump();
      return { status: response.statusCode };
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  };

  close(): Promise<void> {
    return this.agent.close();
  }
}
