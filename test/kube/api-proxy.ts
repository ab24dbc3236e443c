/**
 * A plain-HTTP proxy in front of the real kube-apiserver that can answer chosen requests with a 500
 * for a while, as an overloaded or restarting API server does; everything else is forwarded over TLS
 * untouched, watches included. It also keeps the bodies of status writes, for what status said.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

export interface FailureRule {
  /** Which requests fail (method and path with query). */
  matches(method: string, url: string): boolean;
  /** How many of them fail before requests pass again. */
  remaining: number;
}

export interface ApiProxy {
  url: string;
  /** A KubeConfig that reaches the API server through this proxy. */
  kubeConfig: KubeConfig;
  /** Failures answered so far (method and path). */
  failed: string[];
  /** Bodies of status subresource writes that went through. */
  statusWrites: string[];
  /** Every request forwarded to the API server, as `METHOD path?query`, in arrival order. */
  requests: string[];
  /** Bytes of each forwarded request's answer so far, by the index of `requests` (a watch's grow). */
  answerBytes: number[];
  /** Requests whose forwarding to the API server failed (it was down): a client's sign it noticed. */
  forwardErrors(): number;
  failNext(rule: FailureRule): void;
  close(): Promise<void>;
}

export async function startApiProxy(apiServerUrl: string, ca: string, token: string): Promise<ApiProxy> {
  const upstream = new URL(apiServerUrl);
  const rules: FailureRule[] = [];
  const failed: string[] = [];
  const statusWrites: string[] = [];
  const requests: string[] = [];
  const answerBytes: number[] = [];
  let forwardErrors = 0;
  const server: Server = createServer((req: IncomingMessage, res) => {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const rule = rules.find((r) => r.remaining > 0 && r.matches(method, url));
    if (rule) {
      rule.remaining--;
      failed.push(`${method} ${url.split('?')[0]}`);
      req.resume();
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          reason: 'InternalError',
          code: 500,
          message: 'injected by the test proxy',
        }),
      );
      return;
    }
    const index = requests.push(`${method} ${url}`) - 1;
    answerBytes[index] = 0;
    const isStatusWrite = method === 'PATCH' && url.split('?')[0]?.endsWith('/status');
    const chunks: Buffer[] = [];
    const forward = httpsRequest(
      { host: upstream.hostname, port: upstream.port, path: url, method, headers: req.headers, ca },
      (up) => {
        if (isStatusWrite && (up.statusCode ?? 500) < 300)
          statusWrites.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.on('data', (c: Buffer) => {
          answerBytes[index] = (answerBytes[index] ?? 0) + c.length;
        });
        // The API server went away mid-answer (a watch when it is killed): so does this answer, as
        // the client would see without a proxy between.
        up.on('aborted', () => res.destroy());
        up.on('error', () => res.destroy());
        up.pipe(res);
      },
    );
    forward.on('error', () => {
      forwardErrors++;
      res.destroy();
    });
    req.on('data', (c: Buffer) => {
      if (isStatusWrite) chunks.push(c);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    // Plain HTTP to the local proxy only; the proxy speaks TLS to the API server.
    clusters: [{ name: 'proxy', server: url, skipTLSVerify: true }],
    users: [{ name: 'admin', token }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'admin' }],
    currentContext: 'proxy',
  });
  return {
    url,
    kubeConfig,
    failed,
    statusWrites,
    requests,
    answerBytes,
    forwardErrors: () => forwardErrors,
    failNext: (rule) => rules.push(rule),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
