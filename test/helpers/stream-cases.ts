/**
 * The checks every /fn/ streaming suite makes of a function built from the stream fixtures
 * (stream-functions.ts, and the Node one beside the kube suite): an SSE stream's first event arrives
 * while the handler waits for a gate only the test opens, a client that leaves a held stream cancels
 * the handler, which observes it, and a WebSocket echoes text and binary messages.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { pollUntil } from './poll-until.js';
import { openStream } from './stream-reader.js';
import { connectWebSocket } from './ws-echo-client.js';

/** One function as a suite reaches it: the URL of a path, and a path's JSON answer. */
export interface StreamTarget {
  url(path: string): string;
  json(path: string): Promise<{ status: number; body: Record<string, unknown> }>;
}

export async function expectFirstEventBeforeTheLast(target: StreamTarget): Promise<void> {
  const id = randomUUID();
  const stream = await openStream(target.url(`/sse?id=${id}`));
  try {
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toContain('text/event-stream');
    await stream.until('data: first\n\n');
    expect(stream.received()).toBe('data: first\n\n');
    expect(stream.isOver()).toBe(false);
    expect(await target.json(`/release?id=${id}`)).toEqual({ status: 200, body: { released: id } });
    expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
  } finally {
    stream.leave();
  }
}

export async function expectLeavingCancelsTheHandler(target: StreamTarget, withinMs = 10_000): Promise<void> {
  const id = randomUUID();
  const stream = await openStream(target.url(`/hold?id=${id}`));
  await stream.until('data: first\n\n');
  expect((await target.json(`/observed?id=${id}`)).body).toEqual({ observed: null });
  stream.leave();
  const observed = await pollUntil(
    'the handler observes its client leave',
    async () => ((await target.json(`/observed?id=${id}`)).body?.observed as string | null) ?? undefined,
    withinMs,
    25,
  );
  expect(observed).toBe('cancelled');
}

export async function expectWebSocketEcho(target: StreamTarget, greeting: string): Promise<void> {
  const { ws, next } = await connectWebSocket(target.url('/ws').replace(/^http/, 'ws'));
  try {
    ws.send(greeting);
    expect(await next()).toEqual({ data: greeting, binary: false });
    ws.send(Buffer.from('bytes'), { binary: true });
    expect(await next()).toEqual({ data: 'bytes', binary: true });
  } finally {
    // Not a closing handshake: with a broken tunnel it would never complete.
    ws.terminate();
  }
}
