/**
 * Pull-through package mirrors on the host, for builds on the real node, whose pods reach nothing
 * beyond the node: what an air-gapped cluster's build pods use instead of the public registries.
 *
 * - npm (`--build-arg NPM_CONFIG_REGISTRY=…`): forwards GETs to npm's registry from the host, and keeps
 *   tarballs (immutable, named by version) in the test cache, so a later build fetches them from disk.
 * - PyPI's simple index (`--index-url …/simple/`, or PIP_INDEX_URL): forwards GETs to pypi.org, and
 *   the files its pages link to (on files.pythonhosted.org, rewritten to `…/files/`) from there, kept
 *   in the test cache when a cache directory is given (immutable: named by their hash).
 * - The Go module proxy (`--build-arg GOPROXY=…`): forwards GETs to proxy.golang.org, checksum
 *   database lookups included (so GOSUMDB still checks every module), and keeps a version's .info,
 *   .mod and .zip (immutable) in the test cache.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The machine's test cache, where mirrors keep what they fetched (and the controller image its layers). */
export function testCacheRoot(): string {
  return (
    process.env.SLESS_TESTBIN_DIR ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sless', 'testbin')
  );
}

export interface PackageMirror {
  url: string;
  close(): Promise<void>;
}

/**
 * npm's registry. Listens on `host:port` when that port is free, else on any port: a build that passes
 * the mirror's URL as a build argument gets the same cache keys only from the same URL.
 */
export function startNpmMirror(host: string, cacheDir: string, port = 0): Promise<PackageMirror> {
  return startMirror(host, 'https://registry.npmjs.org', port, {
    dir: cacheDir,
    path: /\/-\/[^/]+\.tgz$/,
    suffix: '.tgz',
  });
}

/** The Go module proxy; listens on `host:port` when free, as npm's does, for the same reason. */
export function startGoMirror(host: string, cacheDir: string, port = 0): Promise<PackageMirror> {
  return startMirror(host, 'https://proxy.golang.org', port, {
    dir: cacheDir,
    path: /\/@v\/[^/]+\.(info|mod|zip)$/,
  });
}

/** PyPI's simple index (pip follows its file links to files.pythonhosted.org, not through here). */
export function startPypiMirror(host: string, cacheDir?: string): Promise<PackageMirror> {
  return startMirror(
    host,
    'https://pypi.org',
    0,
    cacheDir ? { dir: cacheDir, path: /^\/files\// } : undefined,
    {
      upstreamOf: (path) =>
        path.startsWith('/files/') ? `${PYPI_FILES}/${path.slice('/files/'.length)}` : undefined,
      // The simple pages name each file by its absolute URL, which build pods cannot reach.
      rewrite: (body, self) => body.replaceAll(`${PYPI_FILES}/`, `${self}files/`),
    },
  );
}

const PYPI_FILES = 'https://files.pythonhosted.org';

async function startMirror(
  host: string,
  upstream: string,
  port: number,
  cache?: { dir: string; path: RegExp; suffix?: string },
  routing: {
    /** Where a path is fetched from, when not `upstream` + path. */
    upstreamOf?: (path: string) => string | undefined;
    /** Rewrites a text answer (HTML or JSON) for clients that reach only the mirror at `self`. */
    rewrite?: (body: string, self: string) => string;
  } = {},
): Promise<PackageMirror> {
  let self = '';
  if (cache) mkdirSync(cache.dir, { recursive: true });
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    const cacheable =
      req.method === 'GET' && cache !== undefined && cache.path.test(path.split('?')[0] ?? '');
    const cached = join(
      cache?.dir ?? '',
      `${createHash('sha256').update(path).digest('hex')}${cache?.suffix ?? ''}`,
    );
    if (cacheable && existsSync(cached)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(readFileSync(cached));
      return;
    }
    const accept = req.headers.accept;
    fetch(routing.upstreamOf?.(path) ?? `${upstream}${path}`, {
      method: req.method === 'HEAD' ? 'HEAD' : 'GET',
      headers: accept ? { accept } : {},
      signal: AbortSignal.timeout(120_000),
    })
      .then(async (upstream) => {
        let body = Buffer.from(await upstream.arrayBuffer());
        const type = upstream.headers.get('content-type') ?? '';
        if (routing.rewrite && /html|json/.test(type))
          body = Buffer.from(routing.rewrite(body.toString('utf8'), self));
        if (cacheable && upstream.ok) {
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
        res.end(`mirror of ${upstream}: ${e.message}\n`);
      });
  });
  // npm keeps connections alive and reuses them at once: a server that closes an idle one first (Node's
  // default is 5 s) races npm's next request on it, which then fails with "socket hang up".
  server.keepAliveTimeout = 10 * 60_000;
  server.headersTimeout = 10 * 60_000 + 1000;
  server.requestTimeout = 0;
  const listen = (p: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(port).catch(() => listen(0));
  const { port: bound } = server.address() as AddressInfo;
  self = `http://${host}:${bound}/`;
  return {
    url: self,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
