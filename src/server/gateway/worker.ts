/**
 * The gateway thread: it owns the public port and proxies `/fn/` requests to functions with a ready
 * route itself, in an isolate that holds nothing else. The main thread's heap (the API, the
 * controller, git objects, every loaded library) made its garbage collector's pauses long enough to
 * show in the proxy's tail latency; here they are as short as a bare proxy's. Everything else (the
 * API, webhooks, functions that are not ready) is relayed to the main thread.
 */

import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { ActivityBoard } from '../../core/activity-board.js';
import type { MirroredCanary, MirroredRoute, RouteResolver, RouteState } from '../../core/interfaces.js';
import { objectKey } from '../../core/object-key.js';
import { ProxyTallies } from '../../core/proxy-tallies.js';
import { CanarySplits } from '../../proxy/canary-split.js';
import { EndpointPickers } from '../../proxy/least-in-flight.js';
import { EarlyListener } from '../early-listener.js';
import type { FromGateway, GatewayWorkerData, ToGateway } from './protocol.js';

if (!parentPort) throw new Error('the gateway runs as a worker thread');
const port: MessagePort = parentPort;
const data = workerData as GatewayWorkerData;
const send = (message: FromGateway) => port.postMessage(message);

const board = new ActivityBoard(data.activity);
/** One route object per mirrored revision, handed to every request, as the platform does. */
const routes = new Map<string, Entry>();
const NOT_HERE: RouteState = { state: 'unknown' };
/** Per function with endpoints: the requests in flight to each, kept across route changes. */
const pickers = new EndpointPickers();

/** Per function with a canary: its share of requests, its endpoints, and its answers counted. */
const canaries = new CanarySplits();

interface Entry {
  route: RouteState;
  activitySlot?: number;
  canary?: MirroredCanary;
}

const resolver: RouteResolver = {
  async resolve(namespace, name) {
    const key = objectKey(namespace, name);
    const entry = routes.get(key);
    if (!entry) return NOT_HERE;
    // Counted in the same turn as the lookup: a route change (a message, a later turn) cannot slip in
    // between, so once the main thread has its acknowledgement, the count is complete.
    if (entry.activitySlot !== undefined) board.begin(entry.activitySlot);
    const { canary, route } = entry;
    const pick = canary && route.state === 'ready' ? canaries.choose(key, canary) : undefined;
    // The canary's share: its own endpoints, under its revision, each answer counted.
    if (pick && canary && route.state === 'ready')
      return { ...route, endpoints: pick.endpoints, revision: canary.revision, observe: pick.observe };
    return route;
  },
};

function mirrored(key: string, route: MirroredRoute): Entry {
  const endpoints = route.state === 'ready' && route.endpoints?.length ? route.endpoints : undefined;
  if (!endpoints) pickers.drop(key);
  if (route.state !== 'ready' || !route.canary) canaries.drop(key);
  if (route.state !== 'ready') return { route };
  const slot = route.activitySlot;
  return {
    ...(slot !== undefined ? { activitySlot: slot } : {}),
    ...(route.canary ? { canary: route.canary } : {}),
    route: {
      state: 'ready',
      origin: route.origin,
      ...(route.socketPath ? { socketPath: route.socketPath } : {}),
      // Balanced here per request, by this thread's counts, as the main thread does by its own.
      ...(endpoints ? { endpoints: pickers.of(key, endpoints) } : {}),
      timeoutSec: route.timeoutSec,
      ...(route.admission ? { admission: route.admission } : {}),
      ...(route.revision ? { revision: route.revision } : {}),
      ...(slot !== undefined ? { release: () => board.end(slot) } : {}),
    },
  };
}

const tallies = new ProxyTallies();

/**
 * Takes the port before the proxy's modules load (undici: tens of milliseconds), holding the requests
 * that come meanwhile, as the main thread's early listener does without the proxy thread.
 */
async function serve(): Promise<void> {
  let listener: EarlyListener;
  try {
    listener = await EarlyListener.listen(data.host, data.port);
  } catch (error) {
    const { message, code } = error as NodeJS.ErrnoException;
    send({ type: 'listen-failed', message, code });
    return;
  }
  const { server } = listener;
  // As the API server does: clients and load balancers may keep connections for a minute.
  server.keepAliveTimeout = 65_000;
  send({ type: 'listening', url: listener.url });

  const [{ FunctionProxy }, { MainThreadRelay }, { UpgradeProxy }] = await Promise.all([
    import('../../proxy/function-proxy.js'),
    import('./relay.js'),
    import('../../proxy/websocket-upgrade.js'),
  ]);
  const relay = new MainThreadRelay(data.mainSocketPath);
  const proxy = new FunctionProxy({
    routes: resolver,
    onResponse: (namespace, name, status, ms) => tallies.record(namespace, name, status, ms),
    onUpstreamError: (fn, message) => send({ type: 'upstream-error', function: fn, message }),
    elsewhere: (req, res) => relay.relay(req, res),
    ...(data.maxStreamMs ? { maxStreamMs: data.maxStreamMs } : {}),
  });

  const upgrades: InstanceType<typeof UpgradeProxy> = new UpgradeProxy({
    routes: resolver,
    onUpstreamError: (fn, message) => send({ type: 'upstream-error', function: fn, message }),
    elsewhere: (req, socket, head) => relay.relayUpgrade(req, socket, head, upgrades),
    admissions: proxy.admissions,
  });
  server.on('upgrade', (req, socket, head) => upgrades.handle(req, socket, head));

  port.on('message', (message: ToGateway) => {
    switch (message.type) {
      case 'routes':
        for (const [key, route] of message.changes) {
          if (route) routes.set(key, mirrored(key, route));
          else {
            routes.delete(key);
            pickers.drop(key);
            canaries.drop(key);
          }
        }
        send({ type: 'routes-applied', seq: message.seq });
        return;
      case 'take-tallies':
        send({ type: 'tallies', id: message.id, tallies: tallies.take() });
        return;
      case 'take-canary-counts':
        send({ type: 'canary-counts', id: message.id, counts: canaries.take() });
        return;
      case 'take-queues':
        send({ type: 'queues', id: message.id, depths: proxy.queueDepths() });
        return;
      case 'close': {
        const cut = setTimeout(() => server.closeAllConnections(), message.graceMs);
        server.close(() => {
          clearTimeout(cut);
          void Promise.all([proxy.close(), relay.close()]).finally(() => send({ type: 'closed' }));
        });
        server.closeIdleConnections();
        return;
      }
    }
  });

  listener.attach((req, res) => {
    if (FunctionProxy.matches(req.url)) void proxy.handle(req, res);
    else relay.relay(req, res);
  });
}

void serve();
