/**
 * Every replica serves the API, but only the leader runs the control loop. The few requests that
 * need the loop itself (a sync, a pin, a rebuild, a webhook, an invocation's replay) are handed to
 * the leader as they came, bytes and headers unchanged (the leader checks auth and signatures as if
 * it had received them);
 * everything else (reads, and writes of desired state, which the leader sees through its watch) is
 * answered where it arrives.
 */
import { type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { Leadership } from '../core/leadership.js';
import { stripHopByHop } from '../proxy/hop-by-hop.js';

export interface LeaderRoute extends Leadership {
  /** The leader's base URL as advertised on its Lease; undefined while no leader is known. */
  leaderUrl(): string | undefined;
}

/** Marks a request a follower already forwarded, so two replicas that disagree never loop it. */
export const FORWARDED_HEADER = 'x-sless-forwarded-by';

const NEEDS_LEADER = [
  /^\/v1\/webhooks\/[^/]+\/[^/?]+\/?(\?|$)/,
  /^\/v1\/namespaces\/[^/]+\/sources\/[^/]+\/(sync|pin)\/?(\?|$)/,
  /^\/v1\/namespaces\/[^/]+\/functions\/[^/]+\/rebuild\/?(\?|$)/,
  // Only the leader's workers run invocations: a replay queues one with them.
  /^\/v1\/namespaces\/[^/]+\/invocations\/[^/]+\/replay\/?(\?|$)/,
];

/** Whether this request must be handled by the leader (and this replica is not it). */
export function mustForward(leadership: Leadership, req: IncomingMessage): boolean {
  if (leadership.isLeader()) return false;
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return false;
  const url = req.url ?? '';
  return NEEDS_LEADER.some((pattern) => pattern.test(url));
}

function answer(res: ServerResponse, status: 502 | 503, message: string): void {
  const payload = JSON.stringify({ error: message });
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...(status === 503 ? { 'retry-after': '2' } : {}),
  });
  res.end(payload);
}

function unavailable(res: ServerResponse, message: string): void {
  answer(res, 503, message);
}

/**
 * Streams the request to the leader and its answer back; 503 while no leader can be reached. Once the
 * whole request went out, a connection that fails before any answer is a 502, not a 503: the leader
 * may have acted on it (an asynchronous invocation stored, a sync run), and a 503's "retry" would have
 * the caller do it twice.
 */
export function forwardToLeader(route: LeaderRoute, req: IncomingMessage, res: ServerResponse): void {
  const target = route.leaderUrl();
  if (!target || req.headers[FORWARDED_HEADER] !== undefined) {
    req.resume();
    unavailable(res, 'no leader is elected right now (a failover takes up to 15 s); retry');
    return;
  }
  const url = new URL(req.url ?? '/', target);
  const upstream = request(
    url,
    {
      method: req.method,
      headers: { ...stripHopByHop(req.headers), [FORWARDED_HEADER]: route.info().identity },
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, stripHopByHop(answer.headers));
      answer.pipe(res);
    },
  );
  let sent = false;
  upstream.on('finish', () => {
    sent = true;
  });
  upstream.on('error', (error) => {
    if (res.headersSent) res.destroy();
    else if (sent)
      answer(
        res,
        502,
        `the leader at ${target} dropped the connection after the request was sent (${error.message}); it may have been carried out`,
      );
    else unavailable(res, `the leader at ${target} cannot be reached (${error.message}); retry`);
  });
  req.pipe(upstream);
}
