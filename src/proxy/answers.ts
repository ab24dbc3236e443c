/**
 * The writes to a client that the function proxy and the gateway's relay share: a JSON error
 * answer, and an upstream chunk with backpressure, so that a slow client slows the upstream instead
 * of filling memory.
 */
import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';

/** A JSON error answer; once headers are out, the only honest answer left is to cut the response. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: { error: string },
  extra: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...extra,
  });
  res.end(payload);
}

/**
 * Writes an upstream chunk to the client. When the client reads slower than the upstream writes,
 * reading the upstream stops until the client drains.
 */
export function writeUpstreamChunk(
  res: ServerResponse,
  controller: Dispatcher.DispatchController,
  chunk: Buffer,
): void {
  if (res.write(chunk)) return;
  controller.pause();
  res.once('drain', () => controller.resume());
}
