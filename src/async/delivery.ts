/**
 * Delivers one attempt of an asynchronous invocation through sless's own `/fn/` endpoint, as any
 * client's request would go: the proxy routes it to the ready revision, wakes a function at zero,
 * admits it against the function's concurrency limit, counts it for scaling and applies the
 * function's timeout (a 504). The answer is kept up to a limit.
 */
import { Agent, request } from 'undici';
import type { InvocationResult } from '../core/invocations.js';
import { stripHopByHop } from '../proxy/hop-by-hop.js';
import type { DeliveryOutcome, DeliveryTarget } from './dispatcher.js';

/** The most of an answer's body an invocation keeps. */
export const RESULT_BODY_LIMIT = 64 * 1024;

export const INVOCATION_ID_HEADER = 'x-sless-invocation-id';
export const ATTEMPT_HEADER = 'x-sless-attempt';

/** Text when the bytes are UTF-8, base64 otherwise. */
export function encodeBody(bytes: Buffer): Pick<InvocationResult, 'body' | 'bodyEncoding'> {
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes)
    ? { body: text, bodyEncoding: 'utf8' }
    : { body: bytes.toString('base64'), bodyEncoding: 'base64' };
}

function flatHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(stripHopByHop(headers)))
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

export class FunctionEndpointDelivery {
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 128 });

  /** `origin`: where sless's own listener answers (e.g. http://127.0.0.1:8080), known once it listens. */
  constructor(private readonly origin: () => string | undefined) {}

  readonly deliver = async (target: DeliveryTarget): Promise<DeliveryOutcome> => {
    const origin = this.origin();
    if (!origin) return { error: 'sless is not listening yet' };
    const { record, attempt, timeoutSec } = target;
    const headers: string[] = [];
    let hasRequestId = false;
    for (const [name, value] of record.request.headers) {
      if (name === 'x-request-id') hasRequestId = true;
      headers.push(name, value);
    }
    headers.push(INVOCATION_ID_HEADER, record.id, ATTEMPT_HEADER, String(attempt));
    if (!hasRequestId) headers.push('x-request-id', record.id);
    const body = Buffer.from(record.request.body, 'base64');
    // The proxy answers 504 after the function's timeout; this only guards against a proxy that
    // never answers at all.
    const deadline = AbortSignal.timeout(timeoutSec * 1000 + 10_000);
    try {
      const response = await request(
        `${origin}/fn/${record.namespace}/${record.function}${record.request.path}`,
        {
          method: record.request.method as 'POST',
          headers,
          ...(['GET', 'HEAD'].includes(record.request.method) ? {} : { body }),
          dispatcher: this.agent,
          signal: AbortSignal.any([target.signal, deadline]),
          headersTimeout: timeoutSec * 1000 + 10_000,
          bodyTimeout: timeoutSec * 1000 + 10_000,
        },
      );
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      try {
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          const room = RESULT_BODY_LIMIT - kept;
          if (chunk.length > room) {
            chunks.push(chunk.subarray(0, room));
            kept += room;
            truncated = true;
            break;
          }
          chunks.push(chunk);
          kept += chunk.length;
        }
      } catch {
        // The answer's status counts; a body cut short is kept as far as it came.
        truncated = true;
      }
      if (truncated) response.body.destroy();
      return {
        status: response.statusCode,
        result: {
          status: response.statusCode,
          headers: flatHeaders(response.headers),
          ...encodeBody(Buffer.concat(chunks)),
          truncated,
        },
      };
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  };

  close(): Promise<void> {
    return this.agent.close();
  }
}
