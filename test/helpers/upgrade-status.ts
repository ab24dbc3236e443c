/**
 * A plain HTTP WebSocket upgrade request for tests, so that a test sees the status and body a refused
 * upgrade gets (a WebSocket client reports only that it failed).
 */
import { request } from 'node:http';

/** The status and body a plain HTTP upgrade request gets: what a client sees when it is refused. */
export function upgradeStatus(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // An accepted upgrade is not what these callers look at: close it and report its status.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: '' });
    });
    req.on('error', reject);
    req.end();
  });
}
