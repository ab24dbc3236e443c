/**
 * A WebSocket client for echo tests through /fn/: resolves once `ws` has checked the 101 and its
 * Sec-WebSocket-Accept, and reads messages in order, each within a bound, so that a broken tunnel
 * fails the case at once instead of at the test's timeout.
 */
import { WebSocket } from 'ws';

export interface EchoMessage {
  data: string;
  binary: boolean;
}

/** Opens a WebSocket and resolves once ws has checked the 101 and its Sec-WebSocket-Accept. */
export function connectWebSocket(url: string): Promise<{ ws: WebSocket; next: () => Promise<EchoMessage> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const inbox: Array<EchoMessage> = [];
    const waiting: Array<(m: EchoMessage) => void> = [];
    ws.on('message', (data, binary) => {
      const message = { data: String(data), binary };
      const taker = waiting.shift();
      if (taker) taker(message);
      else inbox.push(message);
    });
    const next = () => {
      const queued = inbox.shift();
      if (queued) return Promise.resolve(queued);
      // An echo comes at once or never: a broken tunnel fails the case here, not at the test timeout.
      return new Promise<EchoMessage>((r, no) => {
        const timer = setTimeout(() => no(new Error('no echo within 5 s')), 5000);
        waiting.push((message) => {
          clearTimeout(timer);
          r(message);
        });
      });
    };
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error('no 101 within 10 s'));
    }, 10_000);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve({ ws, next });
    });
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) =>
      reject(new Error(`the upgrade was answered ${res.statusCode}`)),
    );
  });
}
