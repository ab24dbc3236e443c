/** EventStream on a real socket: frames as EventSource reads them, heartbeats, and a reader that stops reading is cut. */
import { createServer, get, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { pollUntil } from '../../test/helpers/poll-until.js';
import { EventStream, type EventStreamOptions } from './event-stream.js';

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

async function serve(
  options: EventStreamOptions,
): Promise<{ stream: Promise<EventStream>; response: IncomingMessage }> {
  let made: (stream: EventStream) => void = () => undefined;
  const stream = new Promise<EventStream>((resolve) => {
    made = resolve;
  });
  server = createServer((_req, res) => made(new EventStream(res, options)));
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const response = await new Promise<IncomingMessage>((resolve) => get(`http://127.0.0.1:${port}/`, resolve));
  return { stream, response };
}

describe('EventStream', () => {
  test('named events as event/data frames, then heartbeats as comments', async () => {
    const { stream, response } = await serve({ heartbeatMs: 20 });
    expect(response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    let text = '';
    response.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    (await stream).send('change', { name: 'a\nb' });
    await pollUntil('frame and heartbeat', async () => text.includes(': keep-alive\n\n'), 5000, 5);
    expect(text.startsWith('event: change\ndata: {"name":"a\\nb"}\n\n')).toBe(true);
    (await stream).close();
  });

  test('a reader that stops reading is cut once its backlog passes the bound, and the stream says closed', async () => {
    const { stream, response } = await serve({ maxBufferedBytes: 64 * 1024 });
    response.pause();
    const events = await stream;
    let closed = false;
    events.onClose(() => {
      closed = true;
    });
    const chunk = 'x'.repeat(16 * 1024);
    let sent = 0;
    // Socket buffers take some megabytes first; the bound then cuts it, far below this many.
    while (!events.closed && sent < 10_000) {
      events.send('change', { chunk });
      sent += 1;
      if (sent % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(events.closed).toBe(true);
    expect(closed).toBe(true);
    expect(sent).toBeLessThan(10_000);
  });
});
