/**
 * Makes an answer given before the request body was read (a 413 for a body over the limit) actually
 * reach the client: node:http's usual close turns the unread bytes into a reset that can overtake
 * the answer, so here the close lingers, for a bounded time, instead.
 */
import type { IncomingMessage, Server } from 'node:http';
import { Socket } from 'node:net';

/**
 * How long a client answered before its body was read may go on sending (read and discarded) before
 * its connection is cut.
 */
export const EARLY_ANSWER_LINGER_MS = 2000;

const requests = new WeakMap<Socket, IncomingMessage>();
const destroySoon = Socket.prototype.destroySoon;

/**
 * node:http ends a connection whose answer says `connection: close` with `socket.destroySoon()`: it
 * is destroyed as soon as the answer is written. After an answer given before the body was read (a
 * 413 for a body over the limit), the client's unread bytes make that close a reset, which can reach
 * the client before the answer does (1 upload in 8 lost its 413 so). Here the close lingers: the
 * answer goes out with a FIN, what the client still sends is read and discarded until its request
 * ends, and a client still sending (or not reading the answer) after EARLY_ANSWER_LINGER_MS is cut.
 */
export function lingerOnClose(server: Server): void {
  server.on('connection', (socket: Socket) => {
    socket.destroySoon = lingeringDestroySoon;
  });
}

/** The request a connection serves now, which its close waits for. */
export function trackRequest(req: IncomingMessage): void {
  requests.set(req.socket, req);
}

function lingeringDestroySoon(this: Socket): void {
  const req = requests.get(this);
  if (!req || req.complete || this.destroyed) {
    destroySoon.call(this);
    return;
  }
  if (this.writable) this.end();
  const cut = setTimeout(() => this.destroy(), EARLY_ANSWER_LINGER_MS);
  this.once('close', () => clearTimeout(cut));
  // A request a proxy's body stream destroyed never ends: the cut ends its connection.
  req.once('end', () => {
    clearTimeout(cut);
    destroySoon.call(this);
  });
  req.resume();
}
