// The floor of a Node proxy: node:http server + one undici Pool, no routing, metrics or header handling.
// Usage: node minimal-node-proxy.mjs PORT UPSTREAM_ORIGIN [UNIX_SOCKET]
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [port, origin, socketPath] = process.argv.slice(2);
const pool = new Pool(origin, {
  connections: 256,
  keepAliveTimeout: 30_000,
  ...(socketPath ? { socketPath } : {}),
});
createServer(async (req, res) => {
  try {
    const upstream = await pool.request({
      path: req.url,
      method: req.method,
      headers: req.headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req,
    });
    res.writeHead(upstream.statusCode, upstream.headers);
    upstream.body.pipe(res);
  } catch (error) {
    res.writeHead(502).end(String(error));
  }
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGINT', () => process.exit(0));
