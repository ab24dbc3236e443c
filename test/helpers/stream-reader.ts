/**
 * Reads a streamed HTTP answer as it arrives, so that a test can see a first event while the
 * handler is still running, and can leave in the middle of a stream (a client disconnect).
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';

export interface OpenStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** Everything received so far. */
  received(): string;
  /** Resolves once the text received so far contains `marker`; rejects if the answer ends first. */
  until(marker: string): Promise<string>;
  /** Resolves with the whole body once the answer ends; rejects if it was cut short. */
  ended(): Promise<string>;
  /** Whether the answer has ended (completely or not). */
  isOver(): boolean;
  /** Leaves: the connection is destroyed. */
  leave(): void;
}

/** GETs `url` (or `options.socketPath` + path) and resolves when the status and headers arrived. */
export function openStream(url: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res: IncomingMessage) => {
      let text = '';
      let over = false;
      let failure: Error | undefined;
      const waiters: Array<() => void> = [];
      const wake = () => {
        for (const waiter of waiters.splice(0)) waiter();
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        wake();
      });
      res.on('end', () => {
        over = true;
        wake();
      });
      res.on('error', (error) => {
        failure = error;
        over = true;
        wake();
      });
      res.on('aborted', () => {
        failure ??= new Error('the answer was cut short');
        over = true;
        wake();
      });
      res.on('close', () => {
        if (!res.complete) failure ??= new Error('the answer was cut short');
        over = true;
        wake();
      });
      const wait = (ready: () => boolean, fail: () => Error | undefined): Promise<string> =>
        new Promise((done, no) => {
          const check = () => {
            if (ready()) return done(text);
            const error = fail();
            if (error) return no(error);
            waiters.push(check);
          };
          check();
        });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        received: () => text,
        until: (marker) =>
          wait(
            () => text.includes(marker),
            () =>
              over
                ? (failure ?? new Error(`the answer ended without ${JSON.stringify(marker)}: ${text}`))
                : undefined,
          ),
        ended: () =>
          wait(
            () => over && !failure,
            () => (over ? failure : undefined),
          ),
        isOver: () => over,
        leave: () => {
          res.destroy();
          req.destroy();
        },
      });
    });
    req.on('error', reject);
  });
}
