/**
 * isomorphic-git's HTTP client, on undici, with every connection's address checked by the outbound
 * policy. Redirects are not followed: a redirect is one more place a URL could be sent without the
 * tenant's URL saying so.
 */
import { STATUS_CODES } from 'node:http';
import type { GitHttpRequest, GitHttpResponse, HttpClient } from 'isomorphic-git';
import { Agent, request } from 'undici';
import type { OutboundPolicy } from './outbound.js';

async function collect(body: AsyncIterableIterator<Uint8Array> | undefined): Promise<Buffer | undefined> {
  if (!body) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** Failures before any answer that a second try may not meet. */
const TRANSIENT = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT']);
const RETRY_DELAY_MS = 200;

export interface GuardedHttpClient extends HttpClient {
  close(): Promise<void>;
}

export function guardedGitHttp(policy: OutboundPolicy): GuardedHttpClient {
  const agent = new Agent({
    connect: { lookup: policy.lookup },
    headersTimeout: 30_000,
    bodyTimeout: 120_000,
  });
  return {
    async request(req: GitHttpRequest): Promise<GitHttpResponse> {
      const url = new URL(req.url);
      // An address literal never goes through lookup, so it is checked here.
      policy.checkHost(url.hostname);
      const body = await collect(req.body);
      const send = () =>
        request(url, {
          method: (req.method ?? 'GET') as 'GET' | 'POST',
          headers: req.headers ?? {},
          ...(body ? { body } : {}),
          dispatcher: agent,
        });
      // Every request of a git fetch only reads (ref listing, upload-pack), so one that failed before
      // any answer is safe to send again: a kept-alive connection the server closed meanwhile, or a
      // connect that timed out on a busy machine, is not the repository being unreachable.
      const response = await send().catch(async (error: unknown) => {
        if (!TRANSIENT.has(String((error as { code?: unknown }).code))) throw error;
        await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
        return send();
      });
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers))
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      return {
        url: req.url,
        method: req.method ?? 'GET',
        statusCode: response.statusCode,
        statusMessage: STATUS_CODES[response.statusCode] ?? '',
        headers,
        body: response.body[Symbol.asyncIterator]() as AsyncIterableIterator<Uint8Array>,
      };
    },
    close: () => agent.close(),
  };
}
