/**
 * Keeps a client's real address across the gateway thread's hop to the main thread: the gateway
 * sends it in a header over the private socket, and only requests that came through that socket may
 * carry it, so a client can never claim an address of its choosing.
 */
import type { IncomingMessage } from 'node:http';

/**
 * The client's address as the gateway thread saw it, on requests it relays to the main thread over a
 * private unix socket (whose own peer address is empty). Only the relay's connections are trusted to
 * carry it: the gateway strips the header from what clients send, and the main thread reads it only on
 * its private socket.
 */
export const RELAYED_CLIENT_ADDRESS = 'x-sless-relayed-client-address';

const relayedAddresses = new WeakMap<IncomingMessage, string>();

/** Takes the relayed address out of a request that came through the private socket. */
export function adoptRelayedClientAddress(req: IncomingMessage): void {
  const raw = req.rawHeaders;
  let address: string | undefined;
  let kept = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === RELAYED_CLIENT_ADDRESS.length && name.toLowerCase() === RELAYED_CLIENT_ADDRESS) {
      address ??= raw[i + 1];
      continue;
    }
    raw[kept++] = name;
    raw[kept++] = raw[i + 1] as string;
  }
  raw.length = kept;
  delete req.headers[RELAYED_CLIENT_ADDRESS];
  if (address !== undefined) relayedAddresses.set(req, address);
}

/** Who sent the request: the relayed address when the gateway passed it on, else the socket's peer. */
export function clientAddressOf(req: IncomingMessage): string {
  return relayedAddresses.get(req) ?? req.socket.remoteAddress ?? '';
}
