/**
 * Without auth, local mode trusts whoever can connect to loopback. A web page the developer visits
 * can also connect there: through DNS rebinding (its own name, resolving to 127.0.0.1, so the Host
 * header is the attacker's name) or with a cross-site "simple" request (a text/plain or form POST
 * needs no CORS preflight). So in that mode only loopback Host values are answered, and a request a
 * browser marks as coming from another site is refused before it reaches a route.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ForbiddenError } from '../errors.js';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
/** Fetch metadata values a browser sends for requests the user made on this origin or typed in. */
const SAME_SITE_FETCH = new Set(['same-origin', 'none']);

function hostnameOf(hostHeader: string): string {
  // `[::1]:8080` keeps its brackets; `localhost:8080` loses the port.
  const bracketed = /^(\[[^\]]*\])(?::\d+)?$/.exec(hostHeader);
  if (bracketed?.[1]) return bracketed[1].toLowerCase();
  return hostHeader.replace(/:\d+$/, '').toLowerCase();
}

function isLoopbackName(hostname: string): boolean {
  return LOOPBACK_NAMES.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** Why the request is refused, or undefined when it is a loopback, same-origin request. */
export function loopbackRefusal(headers: FastifyRequest['headers']): string | undefined {
  const host = headers.host;
  if (typeof host !== 'string' || !isLoopbackName(hostnameOf(host)))
    return 'without authentication sless only answers requests addressed to localhost (Host header)';
  const origin = headers.origin;
  if (typeof origin === 'string') {
    let originHost: string;
    try {
      originHost = new URL(origin).host;
    } catch {
      return 'cross-origin requests are refused without authentication';
    }
    if (!isLoopbackName(hostnameOf(originHost)))
      return 'cross-origin requests are refused without authentication';
  }
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string' && !SAME_SITE_FETCH.has(site))
    return 'cross-site requests are refused without authentication';
  return undefined;
}

/** Installs the check on every route of `app` (webhooks excepted: they carry their own signature). */
export function guardLoopback(app: FastifyInstance, isExempt: (url: string) => boolean): void {
  app.addHook('onRequest', async (request) => {
    if (isExempt(request.url)) return;
    const refusal = loopbackRefusal(request.headers);
    if (refusal) throw new ForbiddenError(refusal);
  });
}
