// The git HTTP client against a real HTTP server that drops connections without answering.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { guardedGitHttp } from './guarded-http.js';
import { OutboundPolicy } from './outbound.js';

describe('guardedGitHttp', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  /** A server that destroys the first `drops` requests' connections unanswered, then answers "refs". */
  const start = async (drops: number) => {
    let seen = 0;
    server = createServer((req, res) => {
      seen++;
      if (seen <= drops) {
        req.socket.destroy();
        return;
      }
      res.end('refs');
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/x.git/git-upload-pack`,
      seen: () => seen,
    };
  };
  const read = async (body: AsyncIterableIterator<Uint8Array> | undefined) => {
    let text = '';
    for await (const chunk of body ?? []) text += Buffer.from(chunk).toString();
    return text;
  };

  it('sends a request again once when its connection dropped before any answer', async () => {
    const { url, seen } = await start(1);
    const client = guardedGitHttp(new OutboundPolicy(['127.0.0.1/32']));
    const response = await client.request({
      url,
      method: 'POST',
      body: [Buffer.from('0000')][Symbol.iterator]() as never,
    });
    expect(response.statusCode).toBe(200);
    expect(await read(response.body)).toBe('refs');
    expect(seen()).toBe(2);
    await client.close();
  });

  it('sends it only twice: a server that keeps dropping is a failure', async () => {
    const { url, seen } = await start(5);
    const client = guardedGitHttp(new OutboundPolicy(['127.0.0.1/32']));
    await expect(client.request({ url, method: 'GET' })).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(seen()).toBe(2);
    await client.close();
  });
});
