/**
 * A thin JSON client over the Kubernetes API. The typed clients of @kubernetes/client-node turn
 * timestamps into Dates and may drop fields of custom resources; the store must read back exactly what
 * it applied, or the next apply sees a difference that is not there, so requests and responses stay
 * plain JSON here. Credentials come from
 * the KubeConfig for every request, so rotated in-cluster tokens are picked up.
 */

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
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

export class KubeHttp {
  private readonly kc: KubeCredentials;
  private readonly server: URL;
  private agent: Agent | undefined;

  constructor(kc: KubeCredentials) {
    this.kc = kc;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
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
    if (secure && !this.agent) {
      this.agent = new Agent({
        keepAlive: true,
        ...(opts.ca ? { ca: opts.ca } : {}),
        ...(opts.cert ? { cert: opts.cert } : {}),
        ...(opts.key ? { key: opts.key } : {}),
        ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      });
    }
    return { url, headers, payload, secure };
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
        { method: 'GET', headers, signal: options.signal, ...(secure ? { agent: this.agent } : {}) },
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
      const req = send(url, { method, headers, ...(secure ? { agent: this.agent } : {}) }, (res) => {
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
    this.agent?.destroy();
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
