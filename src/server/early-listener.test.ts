/**
 * EarlyListener on a real port: connections accepted at once and requests held until the app attaches,
 * matching requests (such as /fn/) served early while others wait, a port in use reported as the
 * listen error, and on the gateway's private socket an upgrade carrying the relayed client address.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { RELAYED_CLIENT_ADDRESS } from '../proxy/client-address.js';
import { EarlyListener } from './early-listener.js';

const answer = (text: string) => (_req: unknown, res: ServerResponse) => res.end(text);

describe('EarlyListener', () => {
  let listener: EarlyListener | undefined;
  afterEach(async () => {
    await listener?.close();
    listener = undefined;
  });

  it('accepts connections at once and holds requests until a handler is attached', async () => {
    listener = await EarlyListener.listen('127.0.0.1', 0);
    const arrived = once(listener.server, 'request');
    const pending = fetch(`${listener.url}/readyz`).then(async (r) => [r.status, await r.text()]);
    const [, res] = (await arrived) as [unknown, ServerResponse];
    expect(res.headersSent).toBe(false);
    expect(res.writableEnded).toBe(false);
    listener.attach(answer('app'));
    expect(await pending).toEqual([200, 'app']);
    expect(await (await fetch(`${listener.url}/later`)).text()).toBe('app');
  });

  it('serves matching requests early and keeps holding the others', async () => {
    listener = await EarlyListener.listen('127.0.0.1', 0);
    const held = fetch(`${listener.url}/v1/x`).then((r) => r.text());
    listener.serveEarly((url) => url?.startsWith('/fn/') ?? false, answer('proxy'));
    expect(await (await fetch(`${listener.url}/fn/default/a`)).text()).toBe('proxy');
    listener.attach(answer('app'));
    expect(await held).toBe('app');
  });

  it('reports a port in use as the listen error', async () => {
    listener = await EarlyListener.listen('127.0.0.1', 0);
    const port = Number(new URL(listener.url).port);
    await expect(EarlyListener.listen('127.0.0.1', port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  // In a child process: the weakening this guards against takes down the process holding the socket,
  // and in this test's own process that hung the run instead of failing it.
  it("answers an upgrade relayed on the private socket, with the client's address taken out of its headers", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sless-relay-'));
    const path = join(dir, 'main.sock');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/helpers/relayed-listener-child.ts', path],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
      expect(line).toBe('listening');
      const client = connect(path);
      const chunks: Buffer[] = [];
      client.on('data', (chunk: Buffer) => chunks.push(chunk));
      client.write(
        [
          'GET /fn/default/echo/chat HTTP/1.1',
          'host: sless',
          'connection: upgrade',
          'upgrade: websocket',
          `${RELAYED_CLIENT_ADDRESS}: 203.0.113.9`,
          'x-trailing: last',
          '',
          '',
        ].join('\r\n'),
      );
      const ended = once(client, 'end').then(() => 'answered');
      const stuck = new Promise<string>((resolve) =>
        setTimeout(() => resolve('no answer in 10 s'), 10_000).unref(),
      );
      expect(await Promise.race([ended, stuck])).toBe('answered');
      const [status, , , , seen] = Buffer.concat(chunks).toString('latin1').split('\r\n');
      expect(status).toBe('HTTP/1.1 101 Switching Protocols');
      expect(JSON.parse(seen ?? '')).toEqual({
        headers: { host: 'sless', connection: 'upgrade', upgrade: 'websocket', 'x-trailing': 'last' },
        raw: ['host', 'sless', 'connection', 'upgrade', 'upgrade', 'websocket', 'x-trailing', 'last'],
        client: '203.0.113.9',
      });
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
