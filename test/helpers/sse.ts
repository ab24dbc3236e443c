/**
 * A Server-Sent Events reader for tests: every event the stream sends is kept in order, and a test
 * waits for the one it expects (then asserts on what else came).
 */
import { pollUntil } from './poll-until.js';

export interface SseEvent {
  event: string;
  data: unknown;
}

export class SseReader {
  readonly events: SseEvent[] = [];
  /** Why the stream ended, when the connection was cut rather than ended. */
  failure: Error | undefined;
  readonly status: number;
  readonly contentType: string | null;
  private readonly controller: AbortController;
  /** Resolves when the server ends the stream (or it is aborted). */
  readonly ended: Promise<void>;

  private constructor(response: Response, controller: AbortController) {
    this.status = response.status;
    this.contentType = response.headers.get('content-type');
    this.controller = controller;
    this.ended = this.read(response);
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<SseReader> {
    const controller = new AbortController();
    const response = await fetch(url, { headers, signal: controller.signal });
    return new SseReader(response, controller);
  }

  private async read(response: Response): Promise<void> {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of response.body) {
        buffered += decoder.decode(chunk as Uint8Array, { stream: true });
        let end = buffered.indexOf('\n\n');
        while (end >= 0) {
          const frame = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          let event = 'message';
          let data = '';
          for (const line of frame.split('\n')) {
            if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data += line.slice(5).trim();
          }
          if (data) this.events.push({ event, data: JSON.parse(data) });
          end = buffered.indexOf('\n\n');
        }
      }
    } catch (error) {
      // A cut connection ends the stream too; the test says whether it expected that.
      if (!this.controller.signal.aborted) this.failure = error as Error;
    }
  }

  /** The first event (at or after `from`) that `match` accepts. */
  async next(
    what: string,
    match: (event: SseEvent) => boolean,
    from = 0,
    timeoutMs = 10_000,
  ): Promise<SseEvent> {
    return pollUntil(what, async () => this.events.slice(from).find(match), timeoutMs, 10);
  }

  close(): void {
    this.controller.abort();
  }
}
