// Server-sent events: a body that is an async generator is streamed, each event flushed as it is
// yielded. context.signal aborts when the client goes away, which ends the loop.
import { setTimeout as sleep } from 'node:timers/promises';

async function* ticks(count, everyMs, signal) {
  for (let i = 1; i <= count && !signal.aborted; i++) {
    yield `id: ${i}\ndata: ${JSON.stringify({ tick: i, at: new Date().toISOString() })}\n\n`;
    if (i < count) await sleep(everyMs, undefined, { signal }).catch(() => {});
  }
}

export function handle(event, context) {
  const count = Math.min(Number(event.query?.count ?? 10) || 10, 1000);
  const everyMs = Math.min(Number(event.query?.everyMs ?? 1000) || 1000, 60_000);
  return {
    statusCode: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    body: ticks(count, everyMs, context.signal),
  };
}
