/**
 * Where an asynchronous invocation comes in: `POST /fn/{ns}/{name}` with `Prefer: respond-async`
 * (RFC 7240) or any request to `/fn-async/{ns}/{name}/*`. The request (method, the function's path,
 * headers minus hop-by-hop ones, the body up to a limit) is stored durably, and only then answered
 * `202 Accepted` with the invocation's id and a Location to read it at.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FORWARDED_HEADER } from '../api/leader-forward.js';
import { SlessError } from '../core/errors.js';
import type { StoredRequest } from '../core/invocations.js';
import { isDnsLabel } from '../core/naming.js';
import { sendJson } from '../proxy/answers.js';
import { RELAYED_CLIENT_ADDRESS } from '../proxy/client-address.js';
import { stripHopByHopRaw } from '../proxy/hop-by-hop.js';
import { prefersAsync } from '../proxy/prefer.js';
import { CALLBACK_HEADER } from './callback.js';
import { ATTEMPT_HEADER, INVOCATION_ID_HEADER } from './delivery.js';
import type { AcceptInput, AsyncDispatcher, AsyncSettings } from './dispatcher.js';

const PATH = /^\/(fn|fn-async)\/([^/?#]*)\/([^/?#]*)(.*)$/s;

/** The most request body an invocation stores (413 above it). */
export const REQUEST_BODY_LIMIT = 1024 * 1024;

/** Headers never stored: sless's own, or the ones that asked for this intake. */
const NOT_STORED = new Set([
  'host',
  'content-length',
  'prefer',
  CALLBACK_HEADER,
  RELAYED_CLIENT_ADDRESS,
  INVOCATION_ID_HEADER,
  ATTEMPT_HEADER,
  // A follower that handed the request to the leader says so; it is sless's, not the caller's.
  FORWARDED_HEADER,
]);

export interface AsyncIntakeOptions {
  /** Where accepted invocations go: the workers, or (on kube) the current leader term's. */
  dispatcher: Pick<AsyncDispatcher, 'accept'>;
  /** The function's async settings; undefined when it does not exist. */
  settings(namespace: string, name: string): Promise<AsyncSettings | undefined>;
  /** Checks a callback URL (the outbound guard); throws a BadRequestError when refused. */
  checkCallback(url: string): Promise<string>;
  bodyLimit?: number;
}

function statusOf(error: unknown): number {
  if (!(error instanceof SlessError)) return 503;
  switch (error.category) {
    case 'Invalid':
      return 400;
    case 'NotFound':
      return 404;
    case 'Conflict':
      return 409;
    case 'Unavailable':
      return 429;
    default:
      return 503;
  }
}

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('the client closed the connection before its body ended'));
    });
  });
}

export class AsyncIntake {
  constructor(private readonly options: AsyncIntakeOptions) {}

  static matches(url: string | undefined): boolean {
    return url?.startsWith('/fn-async/') ?? false;
  }

  /** Never rejects: it runs below fastify, where a rejection would be unhandled. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return this.accept(req, res).catch((error: unknown) => {
      if (!req.complete) req.resume();
      const status = statusOf(error);
      const message =
        error instanceof SlessError ? error.message : 'the invocation could not be stored; try again';
      sendJson(
        res,
        status,
        { error: message },
        status === 429 || status === 503 ? { 'retry-after': '1' } : {},
      );
    });
  }

  private async accept(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const match = PATH.exec(req.url ?? '/');
    const ns = match?.[2] ?? '';
    const name = match?.[3] ?? '';
    const rest = match?.[4] ?? '';
    if (!match || !isDnsLabel(ns) || !isDnsLabel(name) || (rest !== '' && !/^[/?]/.test(rest))) {
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${name}` });
      return;
    }
    const limit = this.options.bodyLimit ?? REQUEST_BODY_LIMIT;
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      this.tooLarge(req, res, limit);
      return;
    }
    const settings = await this.options.settings(ns, name);
    if (!settings) {
      req.resume();
      sendJson(res, 404, { error: `unknown function ${ns}/${name}` });
      return;
    }
    const callbackHeader = req.headers[CALLBACK_HEADER];
    const callback =
      typeof callbackHeader === 'string' && callbackHeader !== ''
        ? await this.options.checkCallback(callbackHeader)
        : undefined;
    let body: Buffer;
    try {
      body = await readBody(req, limit);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        this.tooLarge(req, res, limit);
        return;
      }
      // The client is gone: nothing was stored, and nobody is left to answer.
      res.destroy();
      return;
    }
    const input: AcceptInput = {
      namespace: ns,
      function: name,
      request: this.storedRequest(req, rest, body),
      ...(callback ? { callbackUrl: callback } : {}),
    };
    const record = await this.options.dispatcher.accept(input, settings);
    const location = `/v1/namespaces/${ns}/invocations/${record.id}`;
    const payload = JSON.stringify({
      id: record.id,
      namespace: ns,
      function: name,
      state: record.state,
      location,
    });
    res.writeHead(202, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
      location,
      ...(prefersAsync(req.headers.prefer) ? { 'preference-applied': 'respond-async' } : {}),
    });
    res.end(payload);
  }

  private storedRequest(req: IncomingMessage, rest: string, body: Buffer): StoredRequest {
    const raw = stripHopByHopRaw(req.rawHeaders);
    const headers: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = (raw[i] as string).toLowerCase();
      if (NOT_STORED.has(name)) continue;
      headers.push([name, raw[i + 1] as string]);
    }
    return {
      method: req.method ?? 'POST',
      path: rest === '' || rest.startsWith('?') ? `/${rest}` : rest,
      headers,
      body: body.toString('base64'),
    };
  }

  private tooLarge(req: IncomingMessage, res: ServerResponse, limit: number): void {
    req.resume();
    sendJson(
      res,
      413,
      { error: `an asynchronous invocation's body may be at most ${limit} bytes` },
      { connection: 'close' },
    );
  }
}
