/**
 * A git host for tests: bare repositories served over smart HTTP by the real `git http-backend` as a
 * CGI program, with optional Basic auth, an outage switch answering 503, and a log of each request's
 * wants and depth, so tests can see what a fetch asked for.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Serves bare repositories under `root` over git's smart HTTP protocol with the real
 * `git http-backend` as a CGI program, the way Apache or nginx would.
 */
export interface GitHttpRequest {
  method: string;
  path: string;
  /** True for a pack negotiation that asks for objects ("want" lines); listing refs has none. */
  wantsObjects: boolean;
  /** The object ids the client asked for ("want" lines), and the depth it asked for ("deepen N"). */
  wants: string[];
  deepen: number | undefined;
}

export async function startGitHttpServer(
  root: string,
  /** Basic auth required when set: `username` (default x-access-token) and `token` as the password. */
  options: {
    token?: string;
    username?: string;
    /** Where to listen: 127.0.0.1 and a free port unless given (pods of the real node reach the bridge address). */
    host?: string;
    port?: number;
  } = {},
): Promise<{
  url: string;
  server: Server;
  requests: GitHttpRequest[];
  /** An outage: while false every request gets 503, as from a git host that is down for maintenance. */
  setAvailable(available: boolean): void;
  close(): Promise<void>;
}> {
  const requests: GitHttpRequest[] = [];
  let available = true;
  const server = createServer((request, response) => {
    if (!available) {
      request.resume();
      response.writeHead(503, { 'content-type': 'text/plain' });
      response.end('down for maintenance\n');
      return;
    }
    if (options.token) {
      const user = options.username ?? 'x-access-token';
      const expected = `Basic ${Buffer.from(`${user}:${options.token}`).toString('base64')}`;
      if (request.headers.authorization !== expected) {
        response.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
        response.end();
        return;
      }
    }
    const url = new URL(request.url ?? '/', 'http://localhost');
    const child = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: request.method ?? 'GET',
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        CONTENT_LENGTH: request.headers['content-length'] ?? '',
        GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
        REMOTE_USER: 'test',
        REMOTE_ADDR: '127.0.0.1',
      },
    });
    const logged: GitHttpRequest = {
      method: request.method ?? 'GET',
      path: url.pathname,
      wantsObjects: false,
      wants: [],
      deepen: undefined,
    };
    requests.push(logged);
    request.on('data', (chunk: Buffer) => {
      if (chunk.includes('want ')) logged.wantsObjects = true;
      // pkt-lines: 4 hex digits of length, then "want <oid>" or "deepen <n>".
      for (const match of chunk.toString('latin1').matchAll(/want ([0-9a-f]{40})/g))
        if (match[1]) logged.wants.push(match[1]);
      const deepen = /deepen (\d+)/.exec(chunk.toString('latin1'));
      if (deepen?.[1]) logged.deepen = Number(deepen[1]);
    });
    request.pipe(child.stdin);
    let headerBuffer = Buffer.alloc(0);
    let headersDone = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        response.write(chunk);
        return;
      }
      headerBuffer = Buffer.concat([headerBuffer, chunk]);
      const end = headerBuffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of headerBuffer.subarray(0, end).toString('utf8').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else response.setHeader(name, value);
      }
      response.writeHead(status);
      response.write(headerBuffer.subarray(end + 4));
    });
    child.on('close', () => response.end());
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    server,
    requests,
    setAvailable: (value) => {
      available = value;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
