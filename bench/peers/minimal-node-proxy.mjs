// The floor of a Node proxy: node:http server + one undici Pool, no routing, metrics or header handling.
// Usage: node minimal-node-proxy.mjs PORT UPSTREAM_ORIGIN [UNIX_SOCKET]
// With FORWARDED_HEADERS=1 it does the header work sless's /fn/ must do and no more: hop-by-hop
// headers dropped both ways, X-Forwarded-Host/Proto/For/Prefix and an X-Request-Id added. That
// variant is the same-work reference (with sless's own hop-by-hop rules); the plain one is the floor the issue states its target against.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [port, origin, socketPath] = process.argv.slice(2);
const forwarded = process.env.FORWARDED_HEADERS === '1';
const pool = new Pool(origin, {
  connections: 256,
  keepAliveTimeout: 30_000,
  ...(socketPath ? { socketPath } : {}),
});
// The same hop-by-hop rules as /fn/ (sless's compiled module; bench/proxy.ts compiles dist/ first).
const withoutHopByHop = forwarded
  ? (await import('../../dist/proxy/hop-by-hop.js')).stripHopByHop
  : (headers) => headers;
const idPrefix = randomBytes(6).toString('hex');
let requests = 0;
const requestHeaders = (req) => {
  if (!forwarded) return req.headers;
  const { host, ...headers } = withoutHopByHop(req.headers);
  const peer = req.socket.remoteAddress ?? '';
  return {
    ...headers,
    'x-forwarded-host': host ?? '',
    'x-forwarded-proto': 'http',
    'x-forwarded-for': headers['x-forwarded-for'] ? `${headers['x-forwarded-for']}, ${peer}` : peer,
    'x-forwarded-prefix': '/fn/default/hello',
    'x-request-id': headers['x-request-id'] || `${idPrefix}-${(++requests).toString(36)}`,
  };
};
createServer(async (req, res) => {
  try {
    const upstream = await pool.request({
      path: req.url,
      method: req.method,
      headers: requestHeaders(req),
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req,
    });
    res.writeHead(upstream.statusCode, forwarded ? withoutHopByHop(upstream.headers) : upstream.headers);
    upstream.body.pipe(res);
  } catch (error) {
    res.writeHead(502).end(String(error));
  }
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGINT', () => process.exit(0));
