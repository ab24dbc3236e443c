/**
 * A thin JSON client over the Kubernetes API. The typed clients of @kubernetes/client-node turn
 * timestamps into Dates and may drop fields of custom resources; the store must read back exactly what
 * it applied (seeds lesson 14), so requests and responses stay plain JSON here. Credentials come from
 * the KubeConfig for every request, so rotated in-cluster tokens are picked up.
 */

import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import type { KubeCredentials } from './kubeconfig.js';

export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string;
  /** The API server's own words (the Status message), without the request line. */
  readonly statusMessage: string;
  constructor(code: number, reason: string, message: string, statusMessage = message) {
    super(message);
    this.name = 'KubeApiError';
    this.code = code;
    this.reason = reason;
    this.statusMessage = statusMessage;
  }
}

export function isStatus(error: unknown, code: number): boolean {
  return error instanceof KubeApiError && error.code === code;
}

export const APPLY_PATCH = 'application/apply-patch+yaml';
export const MERGE_PATCH = 'application/merge-patch+json';
export const JSON_PATCH = 'application/json-patch+json';

export interface KubeRequest {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  /** Extra headers, e.g. Impersonate-User in tests. */
  headers?: Record<string, string>;
}

export interface KubeHttpOptions {
  /**
   * Connections that short requests share (default 16); more requests wait for one in order. A burst
   * of reconciles otherwise opens a connection per request in flight, each with its socket and TLS
   * buffers, and glibc keeps the memory they freed long after the burst ends. Watches and log
   * streams hold a connection for minutes and have their own, unbounded.
   */
  maxConnections?: number;
}

/** The agents of one client: bounded for requests, unbounded for long-lived streams. */
interface Agents {
  requests: HttpAgent;
  streams: HttpAgent;
}

export class KubeHttp {
  private readonly kc: KubeCredentials;
  private readonly server: URL;
  private readonly maxConnections: number;
  private agents: Agents | undefined;
  /** Clients made by withOwnConnections: closed with this one. */
  private readonly derived: KubeHttp[] = [];

  constructor(kc: KubeCredentials, options: KubeHttpOptions = {}) {
    this.kc = kc;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
    this.maxConnections = options.maxConnections ?? 16;
  }

  /**
   * The same API server and credentials over connections of its own: for requests that must not wait
   * behind a burst of others (Lease renewals: a late renewal loses leadership).
   */
  withOwnConnections(maxConnections: number): KubeHttp {
    const client = new KubeHttp(this.kc, { maxConnections });
    this.derived.push(client);
    return client;
  }

  async request<T>(method: string, path: string, options: KubeRequest = {}): Promise<T> {
    const text = await this.raw(method, path, options);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /**
   * Sends one request; resolves the body text of a 2xx answer, rejects with KubeApiError otherwise.
   * A keep-alive connection the server already closed fails with ECONNRESET before any answer; such a
   * request is sent once more unless it is a POST (creating twice is not idempotent).
   */
  async raw(method: string, path: string, options: KubeRequest = {}): Promise<string> {
    try {
      return await this.send(method, path, options);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (method === 'POST' || !(code === 'ECONNRESET' || code === 'EPIPE')) throw error;
      return this.send(method, path, options);
    }
  }

  /** URL, headers and agent of one request: credentials come from the KubeConfig every time. */
  private async prepare(
    path: string,
    options: KubeRequest,
  ): Promise<{ url: URL; headers: Record<string, string>; payload: string | undefined; secure: boolean }> {
    const url = new URL(path, this.server);
    const base = this.server.pathname.replace(/\/+$/, '');
    if (base) url.pathname = `${base}${path.split('?')[0]}`;
    for (const [key, value] of Object.entries(options.query ?? {}))
      if (value !== undefined) url.searchParams.set(key, String(value));
    const opts: RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = {
      accept: options.accept ?? 'application/json',
      ...((opts.headers as Record<string, string> | undefined) ?? {}),
      ...(options.headers ?? {}),
    };
    // kubeconfigs with username/password: client-node puts them in `auth`, not in a header.
    if (typeof opts.auth === 'string' && !headers.authorization && !headers.Authorization)
      headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
    let payload: string | undefined;
    if (options.body !== undefined) {
      payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
      headers['content-type'] = options.contentType ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    const secure = url.protocol === 'https:';
    this.agents ??= this.makeAgents(secure, opts);
    return { url, headers, payload, secure };
  }

  private makeAgents(secure: boolean, opts: RequestOptions): Agents {
    const tls = {
      ...(opts.ca ? { ca: opts.ca } : {}),
      ...(opts.cert ? { cert: opts.cert } : {}),
      ...(opts.key ? { key: opts.key } : {}),
      ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
    };
    const bounded = { keepAlive: true, maxSockets: this.maxConnections, maxFreeSockets: this.maxConnections };
    return secure
      ? {
          requests: new HttpsAgent({ ...bounded, ...tls }),
          streams: new HttpsAgent({ keepAlive: false, ...tls }),
        }
      : { requests: new HttpAgent(bounded), streams: new HttpAgent({ keepAlive: false }) };
  }

  /**
   * A GET whose 2xx body is streamed (pods/log with follow): resolves with the response once its
   * headers arrive; the caller reads it and aborts `signal` to stop. Non-2xx rejects with KubeApiError.
   */
  async stream(path: string, options: KubeRequest & { signal: AbortSignal }): Promise<IncomingMessage> {
    const { url, headers, secure } = await this.prepare(path, options);
    return new Promise<IncomingMessage>((resolve, reject) => {
      const send = secure ? httpsRequest : httpRequest;
      const req = send(
        url,
        { method: 'GET', headers, signal: options.signal, agent: this.agents?.streams },
        (res) => {
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) {
            resolve(res);
            return;
          }
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => reject(apiError('GET', url, code, Buffer.concat(chunks).toString('utf8'))));
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  private async send(method: string, path: string, options: KubeRequest): Promise<string> {
    const { url, headers, payload, secure } = await this.prepare(path, options);
    return new Promise<string>((resolve, reject) => {
      const send = secure ? httpsRequest : httpRequest;
      const req = send(url, { method, headers, agent: this.agents?.requests }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) {
            resolve(text);
            return;
          }
          reject(apiError(method, url, code, text));
        });
      });
      req.on('error', reject);
      req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${url.pathname}: timed out`)));
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  close(): void {
    for (const client of this.derived) client.close();
    this.agents?.requests.destroy();
    this.agents?.streams.destroy();
  }
}

/** The API's Status body (reason and message) as a KubeApiError; other bodies are kept as text. */
function apiError(method: string, url: URL, code: number, text: string): KubeApiError {
  let reason = '';
  let message = text.slice(0, 2000);
  try {
    const status = JSON.parse(text) as { reason?: string; message?: string };
    reason = status.reason ?? '';
    message = status.message ?? message;
  } catch {
    // not a Status object: keep the raw text
  }
  return new KubeApiError(code, reason, `${method} ${url.pathname}: ${code} ${message}`, message);
}
