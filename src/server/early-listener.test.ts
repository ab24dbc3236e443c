/**
 * EarlyListener on a real port: connections accepted at once and requests held until the app attaches,
 * matching requests (such as /fn/) served early while others wait, and a port in use reported as the
 * listen error.
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
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
});
