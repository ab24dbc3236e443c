/**
 * A child process holding the main thread's end of the gateway's private socket (EarlyListener on a
 * unix socket, relayed): each upgrade is answered 101 with a JSON line of what the main thread saw,
 * its headers, raw headers and client address. Run as `node --import tsx <this file> <socket path>`;
 * it prints `listening` once the socket accepts, so a test can tell a main thread that stopped
 * answering from one that never started.
 */

import { clientAddressOf } from '../../src/proxy/client-address.js';
import { EarlyListener } from '../../src/server/early-listener.js';

const path = process.argv[2];
if (!path) throw new Error('usage: relayed-listener-child.ts <socket path>');
const listener = await EarlyListener.relayedTo(path);
listener.onUpgrade((req, socket) => {
  const seen = JSON.stringify({ headers: req.headers, raw: req.rawHeaders, client: clientAddressOf(req) });
  socket.end(
    `HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n${seen}\n`,
  );
});
process.stdout.write('listening\n');
