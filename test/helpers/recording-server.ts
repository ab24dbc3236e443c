/**
 * A real HTTP server that records every request (method, path, headers, JSON body) and answers
 * with what the test scripts: the stand-in for a git host's status API, whose request shapes the
 * tests hold to the hosts' documented ones.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

export class RecordingServer {
  readonly requests: RecordedRequest[] = [];
  /** The status codes to answer with, in order; 201 once they are used up. */
  readonly answers: number[] = [];
  private server: Server | undefined;
  private port = 0;

  static async start(): Promise<RecordingServer> {
    const recorder = new RecordingServer();
    await recorder.listen();
    return recorder;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens again on the same port after `stop` (a host coming back). */
  async listen(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          // Kept as text: the test says whether that was right.
        }
        this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
        const code = this.answers.shift() ?? 201;
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(code < 300 ? { id: this.requests.length } : { message: 'failed' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
