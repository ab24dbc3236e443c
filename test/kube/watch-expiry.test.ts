/**
 * Watch expiry (410 Gone) on the real API server: a small proxy in front of kube-apiserver cuts the
 * store's Trigger watch, holds the re-watch while an object is deleted behind the store's back, then
 * answers it the way an expired resourceVersion is answered (an ERROR event with code 410). The store
 * must re-list, report the deletion it missed, and keep watching.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreEvent } from '../../src/core/interfaces.js';
import type { Trigger } from '../../src/core/resources.js';
import { KubeHttp } from '../../src/platform/kube/http.js';
import { KubeStore } from '../../src/platform/kube/kube-store.js';
import { eventually, type KubeEnv, kubeEnv, logger } from './harness.js';

interface Proxy {
  url: string;
  server: Server;
  /** Trigger LIST requests seen (not watches). */
  lists(): number;
  /** Trigger watches the API server has answered and that are still open. */
  watching(): number;
  /** Ends every open Trigger watch, as a server restart or timeout would. */
  cutWatches(): void;
  /** The next Trigger watch is held until release(), then answered with 410. */
  expireNext(): { arrived: Promise<void>; release(): void };
}

function startProxy(upstream: URL, ca: string): Promise<Proxy> {
  const open = new Set<ServerResponse>();
  let pending: { arrive: () => void; gate: Promise<void> } | undefined;
  const isTriggerWatch = (req: IncomingMessage) =>
    /\/triggers(\?|$)/.test(req.url ?? '') && /[?&]watch=/.test(req.url ?? '');
  let lists = 0;
  const server = createServer((req, res) => {
    if (/\/triggers(\?|$)/.test(req.url ?? '') && req.method === 'GET' && !isTriggerWatch(req)) lists++;
    if (isTriggerWatch(req) && pending) {
      const held = pending;
      pending = undefined;
      held.arrive();
      void held.gate.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          `${JSON.stringify({
            type: 'ERROR',
            object: {
              kind: 'Status',
              apiVersion: 'v1',
              status: 'Failure',
              reason: 'Expired',
              code: 410,
              message: 'too old resource version',
            },
          })}\n`,
        );
      });
      return;
    }
    const forward = httpsRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
        ca,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (isTriggerWatch(req)) {
          open.add(res);
          res.on('close', () => open.delete(res));
        }
        up.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        server,
        lists: () => lists,
        watching: () => open.size,
        cutWatches: () => {
          for (const res of open) res.destroy();
        },
        expireNext: () => {
          let arrive: () => void = () => {};
          let release: () => void = () => {};
          const arrived = new Promise<void>((r) => {
            arrive = r;
          });
          const gate = new Promise<void>((r) => {
            release = r;
          });
          pending = { arrive, gate };
          return { arrived, release };
        },
      });
    }),
  );
}

let env: KubeEnv;
let proxy: Proxy;
let store: KubeStore;
let admin: KubeStore;
let viaProxy: KubeHttp;

beforeAll(async () => {
  env = await kubeEnv('expiry');
  proxy = await startProxy(new URL(env.cluster.apiServerUrl), env.cluster.caCert);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // Plain HTTP to the local proxy only; the proxy speaks TLS to the API server.
    clusters: [{ name: 'proxy', server: proxy.url, skipTLSVerify: true }],
    users: [{ name: 'admin', token: env.cluster.adminToken }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'admin' }],
    currentContext: 'proxy',
  });
  viaProxy = new KubeHttp(kc);
  store = new KubeStore({ http: viaProxy, logger, namespaces: [env.ns], retryMs: 100 });
  admin = new KubeStore({ http: env.http, logger });
});
afterAll(async () => {
  store?.stop();
  viaProxy?.close();
  proxy?.server.closeAllConnections();
  await new Promise((r) => proxy?.server.close(r));
  await env?.close();
});

const trigger = (name: string, schedule: string): Trigger => ({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Trigger',
  metadata: { name, namespace: env.ns },
  spec: { type: 'cron', function: 'f', schedule, enabled: true },
});

describe('watch expiry', () => {
  it('re-lists on 410 Gone, reports what was deleted meanwhile, and keeps watching', async () => {
    const events: StoreEvent[] = [];
    store.subscribe((e) => {
      if (e.object.kind === 'Trigger') events.push(e);
    });
    await admin.apply(trigger('gone', '* * * * *'));
    await admin.apply(trigger('stays', '* * * * *'));
    await eventually('both ADDED', async () => events.filter((e) => e.type === 'ADDED').length === 2);

    // The ADDED events may come from the initial list while the watch is still being opened: a watch
    // not open yet cannot be cut, and it would never be held for expiry either.
    await eventually('a Trigger watch is open', async () => proxy.watching() > 0);
    const listsBefore = proxy.lists();
    const expiry = proxy.expireNext();
    proxy.cutWatches();
    await expiry.arrived;
    // Behind the store's back: deleted while it is not watching.
    await admin.delete('Trigger', env.ns, 'gone');
    expiry.release();

    await eventually('DELETED from the re-list', async () =>
      events.some((e) => e.type === 'DELETED' && e.object.metadata.name === 'gone'),
    );
    // It was the re-list that found the deletion, not a resumed watch.
    expect(proxy.lists()).toBeGreaterThan(listsBefore);
    // The watch is back: a later change arrives as an ordinary event.
    await admin.apply(trigger('stays', '*/2 * * * *'));
    await eventually('MODIFIED after the re-list', async () =>
      events.some(
        (e) =>
          e.type === 'MODIFIED' && !e.statusOnly && (e.object as Trigger).spec.schedule === '*/2 * * * *',
      ),
    );
    expect(events.filter((e) => e.type === 'DELETED').map((e) => e.object.metadata.name)).toEqual(['gone']);
  });
});
