/**
 * What the /fn/ proxy does for an answer that streams (one without a content-length: server-sent
 * events, a token stream, a large export): its headers go to the client at once rather than with
 * the first chunk, an SSE answer tells buffering proxies in front not to hold it, and the whole
 * stream is bounded by the platform's maximum stream duration, apart from the function's timeout,
 * which bounds only the wait for the first byte and the gaps between chunks.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/** The longest a streamed answer may last unless configured otherwise: an hour. */
export const DEFAULT_MAX_STREAM_MS = 3_600_000;

/** Whether an answer's body is streamed: framed by chunks or the connection, not by a length. */
export function isStreamed(headers: IncomingHttpHeaders): boolean {
  return headers['content-length'] === undefined;
}

/** Headers a streamed answer gets before they go out: sless never buffers, nor may what is in front. */
export function streamHeaders(headers: Record<string, string | string[]>): void {
  const type = headers['content-type'];
  // nginx and others in front buffer answers unless told not to; an event stream must not wait.
  if (typeof type === 'string' && type.startsWith('text/event-stream') && !('x-accel-buffering' in headers))
    headers['x-accel-buffering'] = 'no';
}

/**
 * Sends a streamed answer's headers now (written, not yet sent), and returns the timer that cuts it
 * at `maxMs` (cleared by the caller when the answer ends). A cut is the only end a stream can get
 * once its status is out; an EventSource reconnects after it.
 */
export function startStream(res: ServerResponse, maxMs: number, cut: () => void): NodeJS.Timeout {
  res.flushHeaders();
  const timer = setTimeout(cut, maxMs);
  timer.unref();
  return timer;
}
