/**
 * watchCollection against a plain-HTTP stand-in for the API server's watch endpoint on a real socket:
 * events handed over in order (a last one without newline too, junk lines skipped), a connection broken
 * mid-stream rejecting without an uncaught error, an abort resolving, and a refused watch rejecting with
 * the server's status.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApiError, KubeHttp } from './http.js';
import { StaticCredentials } from './kubeconfig.js';
import type { KubeObject } from './objects.js';
import { type WatchPhase, watchCollection } from './watch.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

/** A plain-HTTP stand-in for the API server's watch endpoint; `answer` writes the stream. */
async function apiServer(answer: (url: string, res: ServerResponse) => void): Promise<KubeHttp> {
  server = createServer((req, res) => answer(req.url ?? '', res));
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return new KubeHttp(new StaticCredentials({ server: `http://127.0.0.1:${port}` }, { token: 't' }));
}

const event = (type: string, name: string, rv: string) =>
  `${JSON.stringify({ type, object: { metadata: { name, resourceVersion: rv } } })}\n`;

function collect(): { seen: string[]; onEvent: (phase: WatchPhase, object: KubeObject) => void } {
  const seen: string[] = [];
  return { seen, onEvent: (phase, object) => seen.push(`${phase} ${object.metadata.name}`) };
}

describe('watchCollection', () => {
  it('hands every event over in order and resolves when the server ends the stream', async () => {
    let asked = '';
    const http = await apiServer((url, res) => {
      asked = url;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(event('ADDED', 'a', '1') + event('MODIFIED', 'a', '2'));
      res.write('not json\n\n');
      // The last event without a newline still counts.
      res.end(event('DELETED', 'a', '3').trim());
    });
    const { seen, onEvent } = collect();
    await watchCollection(
      http,
      '/apis/x/v1/things',
      { resourceVersion: '7' },
      onEvent,
      new AbortController().signal,
    );
    expect(seen).toEqual(['ADDED a', 'MODIFIED a', 'DELETED a']);
    expect(asked).toBe('/apis/x/v1/things?resourceVersion=7&watch=true');
  });

  it('rejects when the connection breaks mid-stream, without an uncaught error', async () => {
    const http = await apiServer((_url, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(event('ADDED', 'a', '1'));
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const { seen, onEvent } = collect();
    await expect(
      watchCollection(http, '/api/v1/pods', {}, onEvent, new AbortController().signal),
    ).rejects.toThrow();
    expect(seen).toEqual(['ADDED a']);
  });

  it('resolves once aborted', async () => {
    const http = await apiServer((_url, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(event('ADDED', 'a', '1'));
    });
    const abort = new AbortController();
    const { seen, onEvent } = collect();
    const watching = watchCollection(
      http,
      '/api/v1/pods',
      {},
      (phase, object) => {
        onEvent(phase, object);
        abort.abort();
      },
      abort.signal,
    );
    await expect(watching).resolves.toBeUndefined();
    expect(seen).toEqual(['ADDED a']);
  });

  it("rejects with the API server's status when it refuses the watch", async () => {
    const http = await apiServer((_url, res) => {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'pods is forbidden', code: 403 }),
      );
    });
    const failure = watchCollection(http, '/api/v1/pods', {}, () => {}, new AbortController().signal);
    await expect(failure).rejects.toBeInstanceOf(KubeApiError);
    await expect(failure).rejects.toThrow('pods is forbidden');
  });
});
