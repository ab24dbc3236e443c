/**
 * Pieces the attack suites share: a server standing in for a tenant's (or an attacker's) own HTTP
 * server, which records what sless sent it, and API calls as a tenant would make them.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GitSourceStatus } from '../../src/core/resources.js';
import { eventually, type TestSystem } from '../helpers/local-system.js';

export interface RecordingServer {
  url: string;
  port: number;
  requests: Array<{ path: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/**
 * Answers every request with `status` and `body` (401 asks for Basic credentials, as a git server
 * does), and records each request's path and headers.
 */
export async function startRecordingServer(
  options: { status?: number; body?: string } = {},
): Promise<RecordingServer> {
  const requests: RecordingServer['requests'] = [];
  const server: Server = createServer((request, response) => {
    requests.push({ path: request.url ?? '/', headers: request.headers });
    const status = options.status ?? 401;
    response.writeHead(status, {
      'content-type': 'text/plain',
      ...(status === 401 ? { 'www-authenticate': 'Basic realm="git"' } : {}),
    });
    response.end(options.body ?? '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export async function postJson(system: TestSystem, path: string, body: unknown): Promise<Response> {
  return system.call(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** Registers a source through the API (in a namespace it ensures first); expects 200/201. */
export async function registerSource(
  system: TestSystem,
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
): Promise<void> {
  await system.call(`/v1/namespaces/${namespace}/ensure`, { method: 'POST' });
  const response = await postJson(system, `/v1/namespaces/${namespace}/sources`, {
    name,
    spec: { interval: '1h', ...spec },
  });
  if (response.status !== 201 && response.status !== 200)
    throw new Error(`registering ${namespace}/${name}: ${response.status} ${await response.text()}`);
}

/** Waits for the source's Ready condition to turn False and returns its reason and message. */
export async function sourceFailure(
  system: TestSystem,
  namespace: string,
  name: string,
): Promise<{ reason: string; message: string }> {
  return eventually(
    async () => {
      const status = (await system.store.get('GitSource', namespace, name))?.status as
        | GitSourceStatus
        | undefined;
      const ready = status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.status === 'False' ? { reason: ready.reason, message: ready.message } : undefined;
    },
    30_000,
    `${namespace}/${name} to fail`,
  );
}
