// Proxy overhead: autocannon (50 connections, keep-alive) against the same runtime process twice in
// one run: directly, and through sless's /fn/ proxy. Reports req/s as a ratio and p50/p99 latency.
// A third measurement, a bare node:http + undici proxy with no routing, headers or metrics, shows
// the floor any Node proxy hits on the same machine.
// Run: npx tsx bench/proxy-overhead.ts   (DURATION=seconds per measurement, default 8; SANDBOX=off runs
// the function unsandboxed, for an A/B of the sandbox's cost)
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { Agent } from 'undici';
import { functionManifest, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { startTestSystem } from '../test/helpers/local-system.js';

const DURATION = Number(process.env.DURATION ?? 8);

interface Result {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function load(url: string, duration: number, socketPath?: string): Promise<Result> {
  const result = await autocannon({
    url,
    connections: 50,
    duration,
    pipelining: 1,
    ...(socketPath ? { socketPath } : {}),
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}

async function main(): Promise<void> {
  const repo = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return { ok: true };`),
  });
  const system = await startTestSystem({
    url: repo.dir,
    sandbox: process.env.SANDBOX === 'off' ? 'off' : 'auto',
  });
  let route = await system.platform.resolve('default', 'hello');
  while (route.state !== 'ready') {
    await new Promise((r) => setTimeout(r, 50));
    route = await system.platform.resolve('default', 'hello');
  }
  route.release?.();
  const direct = `${route.origin}/`;
  const proxied = `${system.url}/fn/default/hello`;
  // A local function serves on a unix socket (its own network namespace when sandboxed).
  const socketPath = route.socketPath;
  const bareAgent = new Agent({
    keepAliveTimeout: 30_000,
    connections: 256,
    ...(socketPath ? { socketPath } : {}),
  });
  const origin = route.origin;
  const bare = createServer(async (_request, res) => {
    const upstream = await bareAgent.request({ origin, path: '/', method: 'GET' });
    res.writeHead(upstream.statusCode, { 'content-type': String(upstream.headers['content-type']) });
    upstream.body.pipe(res);
  });
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;
  await load(direct, 1, socketPath);
  await load(proxied, 1);
  await load(bareUrl, 1);
  const d = await load(direct, DURATION, socketPath);
  const p = await load(proxied, DURATION);
  const b = await load(bareUrl, DURATION);
  bare.close();
  await bareAgent.close();
  await system.close();
  await repo.remove();
  const row = (name: string, r: Result) =>
    `${name.padEnd(8)} ${r.rps.toFixed(0).padStart(7)} req/s  p50 ${String(r.p50).padStart(3)} ms  p99 ${String(r.p99).padStart(3)} ms  errors ${r.errors}  non-2xx ${r.non2xx}`;
  console.log(row('direct', d));
  console.log(row('proxied', p));
  console.log(row('bare', b));
  console.log(`ratio proxied/direct: ${(p.rps / d.rps).toFixed(2)} (target >= 0.8)`);
  console.log(
    `ratio bare/direct: ${(b.rps / d.rps).toFixed(2)}; proxied/bare: ${(p.rps / b.rps).toFixed(2)}`,
  );
}

await main();
