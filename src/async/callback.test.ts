/**
 * Result callbacks of asynchronous invocations: loopback, private, metadata, non-HTTP and credentialled
 * URLs are refused; an allowed address on a real local server gets the result once, without the stored
 * request and with no redirect followed; and the sender checks the address again at send time.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { InvocationRecord } from '../core/invocations.js';
import { OutboundPolicy } from '../source/outbound.js';
import { CallbackSender, checkCallbackUrl } from './callback.js';

function record(url: string): InvocationRecord {
  return {
    id: '5f0c6c5e-0000-4000-8000-000000000001',
    namespace: 'default',
    function: 'hello',
    state: 'succeeded',
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:01.000Z',
    request: { method: 'POST', path: '/', headers: [['authorization', 'Bearer secret']], body: 'eA==' },
    maxAttempts: 3,
    backoffMs: 10,
    attempts: [
      {
        number: 1,
        startedAt: '2026-01-01T00:00:00.500Z',
        finishedAt: '2026-01-01T00:00:01.000Z',
        status: 200,
      },
    ],
    result: { status: 200, headers: {}, body: '{"ok":true}', bodyEncoding: 'utf8', truncated: false },
    callback: { url, state: 'pending' },
  };
}

describe('callback URLs', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    server = undefined;
  });

  it.each([
    ['http://127.0.0.1/x', /loopback/],
    ['http://localhost:8080/x', /loopback/],
    ['http://[::1]/x', /loopback/],
    ['http://10.1.2.3/x', /private/],
    ['http://169.254.169.254/latest/meta-data', /metadata/],
    ['ftp://example.com/x', /http or https/],
    ['http://user:pw@example.com/x', /credentials/],
    ['not a url', /is not a URL/],
  ])('%s is refused', async (url, reason) => {
    await expect(checkCallbackUrl(new OutboundPolicy(), url)).rejects.toThrow(reason);
    await expect(checkCallbackUrl(new OutboundPolicy(), url)).rejects.toThrow(/^x-callback-url: /);
  });

  it('an allowed address gets the result once, without the stored request, and no redirect is followed', async () => {
    const received: { body: string; headers: IncomingMessage['headers'] }[] = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ body, headers: req.headers });
        res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/done`;
    const policy = new OutboundPolicy(['127.0.0.1/32']);
    expect(await checkCallbackUrl(policy, url)).toBe(url);
    const sender = new CallbackSender(policy);
    const outcome = await sender.send(record(url));
    await sender.close();
    expect(outcome).toEqual({ status: 302 });
    expect(received).toHaveLength(1);
    const payload = JSON.parse(received[0]?.body ?? '{}');
    expect(payload).toMatchObject({ id: record(url).id, state: 'succeeded', attempts: 1 });
    expect(payload.result.body).toBe('{"ok":true}');
    expect(received[0]?.body).not.toContain('secret');
    expect(received[0]?.headers['x-sless-invocation-id']).toBe(record(url).id);
  });

  it('the sender checks the address again: a loopback callback is not sent without an allowance', async () => {
    const outcome = await new CallbackSender(new OutboundPolicy()).send(record('http://127.0.0.1:9/x'));
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toMatch(/loopback/);
  });
});
