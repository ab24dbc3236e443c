/**
 * A pull-through npm registry mirror on the host, for builds on the real node: what an air-gapped
 * cluster's build pods use instead of registry.npmjs.org (`--build-arg NPM_CONFIG_REGISTRY=…`). It
 * forwards GETs to npm's registry from the host, and keeps tarballs (immutable, named by version) in
 * the test cache, so a later build fetches them from disk.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

const UPSTREAM = 'https://registry.npmjs.org';

export interface NpmMirror {
  url: string;
  close(): Promise<void>;
}

export async function startNpmMirror(host: string, cacheDir: string): Promise<NpmMirror> {
  mkdirSync(cacheDir, { recursive: true });
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    const tarball = req.method === 'GET' && /\/-\/[^/]+\.tgz$/.test(path);
    const cached = join(cacheDir, `${createHash('sha256').update(path).digest('hex')}.tgz`);
    if (tarball && existsSync(cached)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(readFileSync(cached));
      return;
    }
    const accept = req.headers.accept;
    fetch(`${UPSTREAM}${path}`, {
      method: req.method === 'HEAD' ? 'HEAD' : 'GET',
      headers: accept ? { accept } : {},
      signal: AbortSignal.timeout(120_000),
    })
      .then(async (upstream) => {
        const body = Buffer.from(await upstream.arrayBuffer());
        if (tarball && upstream.ok) {
          const partial = `${cached}.${process.pid}`;
          writeFileSync(partial, body);
          renameSync(partial, cached);
        }
        res.writeHead(upstream.status, {
          'content-type': upstream.headers.get('content-type') ?? 'application/octet-stream',
        });
        res.end(body);
      })
      .catch((e: Error) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`npm mirror: ${e.message}\n`);
      });
  });
  // npm keeps connections alive and reuses them at once: a server that closes an idle one first (Node's
  // default is 5 s) races npm's next request on it, which then fails with "socket hang up".
  server.keepAliveTimeout = 10 * 60_000;
  server.headersTimeout = 10 * 60_000 + 1000;
  server.requestTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
