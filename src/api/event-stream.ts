/**
 * One Server-Sent Events answer: named events written as `event:`/`data:` frames, a comment line as a
 * heartbeat so idle proxies keep the connection, and a bound on what may wait for a slow reader. A
 * reader that falls that far behind is cut: it reconnects and reads everything afresh, which costs
 * less than holding an unbounded backlog for it.
 */
import type { ServerResponse } from 'node:http';

export interface EventStreamOptions {
  /** Milliseconds between heartbeats. */
  heartbeatMs?: number;
  /** Bytes that may wait in the socket's buffer before the reader is cut. */
  maxBufferedBytes?: number;
}

export class EventStream {
  private readonly out: ServerResponse;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly maxBuffered: number;
  private closedFlag = false;
  private readonly closeListeners: Array<() => void> = [];

  constructor(out: ServerResponse, options: EventStreamOptions = {}) {
    this.out = out;
    this.maxBuffered = options.maxBufferedBytes ?? 1024 * 1024;
    out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      // Reverse proxies that buffer answers (nginx) would hold every event back.
      'x-accel-buffering': 'no',
    });
    out.flushHeaders();
    this.heartbeat = setInterval(() => this.raw(': keep-alive\n\n'), options.heartbeatMs ?? 15_000);
    this.heartbeat.unref();
    out.on('close', () => this.close());
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  onClose(listener: () => void): void {
    if (this.closedFlag) listener();
    else this.closeListeners.push(listener);
  }

  /** Sends one event; `data` is JSON on one line, as EventSource readers expect. */
  send(event: string, data: unknown): void {
    this.raw(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    clearInterval(this.heartbeat);
    if (!this.out.writableEnded) this.out.end();
    for (const listener of this.closeListeners.splice(0)) listener();
  }

  private raw(text: string): void {
    if (this.closedFlag) return;
    this.out.write(text);
    if (this.out.writableLength > this.maxBuffered) {
      this.close();
      this.out.destroy();
    }
  }
}
