// The kube controller's /fn/ beside a minimal Node proxy (bench/peers), in one run, against the same
// function origin: the controller runs in this process against the real kube-apiserver + etcd of
// test/cluster (no node: the played kubelet of test/kube marks the Deployment available, and the
// route is pointed at the origin, as the test/kube tests do), and the function's "pod" is a plain
// node:http server in a child process. Load: wrk, 1 thread, 50 connections. Each round measures /fn/
// and the minimal proxy back to back, in turns (A B, then B A, ...); the figure is the median of the
// per-round p99 ratios, as bench/proxy.ts has it.
// Both ways the controller can serve /fn/ are measured, one after the other: "thread" (the gateway
// thread, `sless controller`'s default) and "inline" (the main thread, `--proxy-thread off`).
// Run: npx tsx bench/kube-proxy.ts   (DURATION=seconds per measurement, default 4; ROUNDS, default 5;
// MODES=thread,inline, the default, or one of them). wrk comes from Debian (apt-get install wrk).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { buildName } from '../src/core/naming.js';
import type { FunctionStatus } from '../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../src/main.js';
import { getObject, type KubeObject } from '../src/platform/kube/objects.js';
import { JOB } from '../src/platform/kube/resource-types.js';
import { freePort } from '../src/platform/local/ports.js';
import { Gateway } from '../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource, nodeHandler } from '../test/helpers/git.js';
import { startRemoteRepo } from '../test/helpers/remote-repo.js';
import { markBuildSucceeded, playHealthyKubelet } from '../test/kube/play.ts';
import { ensureCompiled } from './compiled.ts';
import { benchKubeEnv } from './kube-env.ts';
import { accepts } from './net.ts';
import { report } from './report.ts';
import { median, percentile } from './stats.js';

const DURATION = Number(process.env.DURATION ?? 4);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const MODES = (process.env.MODES ?? 'thread,inline').split(',').map((m) => m.trim());
for (const mode of MODES)
  if (mode !== 'thread' && mode !== 'inline')
    throw new Error(`MODES: "${mode}" is neither thread nor inline`);
const PEERS = fileURLToPath(new URL('./peers/', import.meta.url));
const logger = pino({ level: process.env.SLESS_BENCH_LOG_LEVEL ?? 'silent' });

async function eventually(what: string, check: () => Promise<unknown>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not true after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The function's pod: answers every request at once. */
const ORIGIN = `
const http = require('node:http');
const server = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('ok')); });
server.keepAliveTimeout = 65000;
server.listen(Number(process.argv[1]), '127.0.0.1');
`;

interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Milliseconds from wrk's "1.23ms" / "456.00us" / "1.02s". */
function millis(text: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (!m) return Number.NaN;
  const value = Number(m[1]);
  return m[2] === 'us' ? value / 1000 : m[2] === 's' ? value * 1000 : value;
}

async function wrk(url: string, seconds: number): Promise<Load> {
  const child = spawn('wrk', ['-t1', '-c50', `-d${seconds}s`, '--latency', url], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`wrk ${url} exited with ${code}`);
  const errors =
    [...out.matchAll(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/g)]
      .flatMap((m) => m.slice(1).map(Number))
      .reduce((a, b) => a + b, 0) + Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]),
    p50: millis(/\s50%\s+(\S+)/.exec(out)?.[1] ?? ''),
    p99: millis(/\s99%\s+(\S+)/.exec(out)?.[1] ?? ''),
    errors,
  };
}

async function waitForPort(port: number, child: ChildProcess, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error(`${what} did not listen within 30 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const loadAverage = () =>
  spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout.split(' ').slice(0, 3).join(' ');

/** wrk from Debian: installed here when missing and this runs as root with apt-get, as `npm test` does its packages. */
function ensureWrk(): void {
  const has = () => spawnSync('sh', ['-c', 'command -v wrk']).status === 0;
  if (has()) return;
  if (process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get']).status === 0) {
    console.log('kube-proxy: installing wrk with apt-get');
    spawnSync(
      'sh',
      [
        '-c',
        'apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends wrk || (apt-get update && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends wrk)',
      ],
      { stdio: 'inherit' },
    );
  }
  if (!has()) throw new Error('wrk missing: apt-get install -y wrk');
}

async function main(): Promise<void> {
  ensureWrk();
  // The gateway thread runs the compiled worker.
  ensureCompiled();
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  try {
    const env = await benchKubeEnv('kproxy');
    cleanups.unshift(() => env.close());
    const originPort = await freePort();
    const origin = spawn(process.execPath, ['-e', ORIGIN, String(originPort)], { stdio: 'ignore' });
    children.push(origin);
    const minimalPort = await freePort();
    const minimal = spawn(
      process.execPath,
      [join(PEERS, 'minimal-node-proxy.mjs'), String(minimalPort), `http://127.0.0.1:${originPort}`],
      { stdio: 'ignore' },
    );
    children.push(minimal);
    await waitForPort(originPort, origin, 'the function origin');
    await waitForPort(minimalPort, minimal, 'the minimal Node proxy');
    const repo = await startRemoteRepo({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'hello';`),
    });
    cleanups.unshift(() => repo.close());
    const stopKubelet = playHealthyKubelet(env.http, env.ns);
    cleanups.unshift(stopKubelet);
    const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
    const minimalUrl = `http://127.0.0.1:${minimalPort}/`;
    const results: Array<{
      mode: string;
      ratio: number;
      quartiles: [number, number];
      fn: Load;
      minimal: Load;
    }> = [];
    let first = true;
    for (const mode of MODES) {
      const gateway = mode === 'thread' ? await Gateway.start('127.0.0.1', 0) : undefined;
      const system: KubeSystem = await startKubeSystem(
        {
          ...env.config,
          proxyThread: mode === 'thread',
          leaderElection: { ...env.config.leaderElection, enabled: false },
        },
        {
          logger,
          kubeConfig: env.cluster.kubeConfig,
          originOf: () => `http://127.0.0.1:${originPort}`,
          pollMs: 100,
          ...(gateway ? { listener: gateway, gateway } : {}),
        },
      );
      try {
        if (first) {
          await system.store.apply(gitSource('repo', env.ns, repo.url));
          await eventually('build Job', () =>
            getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('hello', commit)),
          );
          await markBuildSucceeded(
            env.http,
            env.controllerNs,
            buildName('hello', commit),
            `sha256:${'0'.repeat(64)}`,
          );
          first = false;
        }
        await eventually(
          'hello Ready',
          async () => {
            const fn = await system.store.get('Function', env.ns, 'hello');
            return (fn?.status as FunctionStatus | undefined)?.phase === 'Ready';
          },
          60_000,
        );
        const fnUrl = `${system.url}/fn/${env.ns}/hello/`;
        await eventually('/fn/ answers', async () => (await fetch(fnUrl)).status === 200, 60_000);
        // Warm both (JIT, connection pools; the thread's route told) before any round counts.
        await wrk(fnUrl, 2);
        await wrk(minimalUrl, 2);
        const rounds: Array<{ fn: Load; minimal: Load }> = [];
        for (let round = 0; round < ROUNDS; round++) {
          const order = round % 2 === 0 ? (['fn', 'minimal'] as const) : (['minimal', 'fn'] as const);
          const measured: Partial<Record<'fn' | 'minimal', Load>> = {};
          for (const target of order)
            measured[target] = await wrk(target === 'fn' ? fnUrl : minimalUrl, DURATION);
          const fn = measured.fn as Load;
          const min = measured.minimal as Load;
          rounds.push({ fn, minimal: min });
          console.log(
            `${mode} round ${round + 1}: /fn/ ${Math.round(fn.rps)} req/s p50 ${fn.p50.toFixed(2)} p99 ${fn.p99.toFixed(2)} ms (${fn.errors} errors); ` +
              `minimal ${Math.round(min.rps)} req/s p50 ${min.p50.toFixed(2)} p99 ${min.p99.toFixed(2)} ms; ` +
              `p99 ratio ${(fn.p99 / min.p99).toFixed(2)}; load average ${loadAverage()}`,
          );
        }
        const ratios = rounds.map((r) => r.fn.p99 / r.minimal.p99);
        const pick = (key: 'fn' | 'minimal'): Load => ({
          rps: median(rounds.map((r) => r[key].rps)),
          p50: median(rounds.map((r) => r[key].p50)),
          p99: median(rounds.map((r) => r[key].p99)),
          errors: rounds.reduce((sum, r) => sum + r[key].errors, 0),
        });
        results.push({
          mode,
          ratio: median(ratios),
          quartiles: [percentile(ratios, 25), percentile(ratios, 75)],
          fn: pick('fn'),
          minimal: pick('minimal'),
        });
      } finally {
        await system.stop();
        // startKubeSystem closes its listener (the gateway) when it stops.
      }
    }
    console.log('');
    for (const r of results) {
      console.log(
        `kube /fn/ (${r.mode}) ÷ minimal Node proxy, p99: median ${r.ratio.toFixed(2)} (quartiles ${r.quartiles[0].toFixed(2)}–${r.quartiles[1].toFixed(2)}, ${ROUNDS} rounds); ` +
          `/fn/ p50 ${r.fn.p50.toFixed(2)} p99 ${r.fn.p99.toFixed(2)} ms ${Math.round(r.fn.rps)} req/s, ` +
          `minimal p50 ${r.minimal.p50.toFixed(2)} p99 ${r.minimal.p99.toFixed(2)} ms ${Math.round(r.minimal.rps)} req/s` +
          (r.fn.errors ? `; ${r.fn.errors} /fn/ errors` : ''),
      );
      report({
        bench: 'kube-proxy',
        measure: `kube /fn/ p99 (${r.mode === 'thread' ? 'gateway thread' : 'main thread'}), wrk -c50`,
        value: `${r.fn.p99.toFixed(2)} ms (p50 ${r.fn.p50.toFixed(2)})`,
        baseline: `minimal Node proxy ${r.minimal.p99.toFixed(2)} ms`,
        ratio: r.ratio,
        target: '≤ 1× minimal Node proxy',
        met: r.ratio <= 1 && r.fn.errors === 0,
      });
    }
  } finally {
    for (const child of children) child.kill();
    for (const cleanup of cleanups) await cleanup();
  }
}

await main();
process.exit(0);
