// The /fn/ proxy beside its peers, in one run, against the same Node function process: direct (no
// proxy), sless's /fn/ (the compiled `sless dev`, in its own process as a user runs it), a minimal Node
// proxy (node:http + an undici Pool, bench/peers), Go's httputil.ReverseProxy (the OpenFaaS gateway's
// shape, bench/peers/go-proxy) and nginx with a keep-alive upstream (one worker). Load: wrk, 1
// thread, 50 connections. Rounds alternate the targets so that machine noise hits all of them alike;
// each figure is the median over rounds, and each round's /fn/ ratios are printed with the load
// average, since on a shared machine one round can differ from the next.
// CPU time per request of each proxy process (from /proc) is reported too: on a busy machine it is
// steadier than req/s, which depends on how much CPU the scheduler happened to give each process.
// wrk and nginx come from Debian and are installed with apt-get when missing (as root).
// /fn/ and the minimal Node proxy are measured back to back in every round, in turns (A B, then B A,
// ...), and the figure against the target is the median of the per-round ratios, with their spread:
// a ratio of medians taken minutes apart measures the machine's other users as much as the proxy.
// Run: npx tsx bench/proxy.ts   (DURATION=seconds per measurement, default 4; ROUNDS, default 7;
// TARGETS=fn,minimal measures only those (keys: direct fn baseline minimal headers go nginx inline;
// default all; "inline" is a second `sless dev` with `--proxy-thread off`, /fn/ from its main thread; "headers" is the minimal proxy doing the same header work as /fn/, see bench/peers);
// PIN=1 pins the proxies to CPU 1 and wrk and the function to CPU 0 with taskset (2 cores or more);
// RATES=r1,r2 (default 2000,6000; "none" skips them): after the wrk rounds, /fn/ and the minimal
// proxy under open-loop load at those fixed rates (vegeta, see bench/open-loop.ts), ROUNDS back-to-back
// pairs per rate, DURATION seconds each (vegeta itself needs about a core at 12,000/s here, and then
// dominates the tail it measures);
// SLESS_BASELINE=another checkout, compiled: its /fn/ is measured too, as "/fn/ baseline", against its
// own copy of the function: a before/after in one run)
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { ensureCompiled } from './compiled.ts';
import { accepts } from './net.ts';
import { ensureVegeta, type OpenLoad, openLoop } from './open-loop.ts';
import { cpuSeconds } from './proc-stat.ts';
import { report } from './report.ts';
import { median, percentile } from './stats.js';

const DURATION = Number(process.env.DURATION ?? 4);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const WANTED = process.env.TARGETS?.split(',').map((t) => t.trim());
const PIN = process.env.PIN === '1';
const RATES =
  process.env.RATES === 'none'
    ? []
    : (process.env.RATES ?? '2000,6000').split(',').map((rate) => {
        const value = Number(rate);
        if (!Number.isInteger(value) || value <= 0)
          throw new Error(`RATES: "${rate}" is no positive integer`);
        return value;
      });
const wanted = (key: string): boolean => key === 'fn' || key === 'minimal' || !WANTED || WANTED.includes(key);

/** Pins every thread of each process to one CPU (taskset from util-linux). */
function pin(cpu: number, pids: number[]): void {
  for (const pid of pids)
    if (pid) execFileSync('taskset', ['-a', '-cp', String(cpu), String(pid)], { stdio: 'ignore' });
}
const PEERS = fileURLToPath(new URL('./peers/', import.meta.url));

function ensureDebianTools(): void {
  const missing = ['wrk', 'nginx'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0,
  );
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0)
    throw new Error(`${missing.join(', ')} missing: apt-get install -y ${missing.join(' ')}`);
  console.log(`installing ${missing.join(', ')} from Debian (apt-get)`);
  const apt = (...args: string[]) =>
    execFileSync('apt-get', args, {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  try {
    apt('install', '-y', '-qq', '--no-install-recommends', ...missing);
  } catch {
    apt('update', '-qq');
    apt('install', '-y', '-qq', '--no-install-recommends', ...missing);
  }
  // The package's own nginx service (port 80) is never used here.
  spawnSync('sh', ['-c', 'service nginx stop || systemctl disable --now nginx'], { stdio: 'ignore' });
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

function childPids(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) pids.push(Number(entry));
    } catch {}
  }
  return pids;
}

interface Load {
  rps: number;
  /** CPU microseconds the proxy process spent per request (NaN for direct). */
  cpuUs: number;
  /**
   * CPU microseconds the function process (the same one behind every proxy but the baseline) spent
   * per request: what the proxy's added request headers cost the other side.
   */
  functionCpuUs: number;
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

async function wrk(url: string, seconds: number, pids: number[], functionPids: number[]): Promise<Load> {
  const cpuOf = (of: number[]) => of.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const cpuBefore = cpuOf(pids);
  const functionCpuBefore = cpuOf(functionPids);
  const args = ['-t1', '-c50', `-d${seconds}s`, '--latency', url];
  const child = spawn(PIN ? 'taskset' : 'wrk', PIN ? ['-c', '0', 'wrk', ...args] : args, {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`wrk ${url} exited with ${code}`);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const p50 = millis(/\s50%\s+(\S+)/.exec(out)?.[1] ?? '');
  const p99 = millis(/\s99%\s+(\S+)/.exec(out)?.[1] ?? '');
  const errors =
    [...out.matchAll(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/g)]
      .flatMap((m) => m.slice(1).map(Number))
      .reduce((a, b) => a + b, 0) + Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const cpu = cpuOf(pids) - cpuBefore;
  const functionCpu = cpuOf(functionPids) - functionCpuBefore;
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  return {
    rps,
    cpuUs: pids.length ? (cpu / requests) * 1e6 : Number.NaN,
    functionCpuUs: (functionCpu / requests) * 1e6,
    p50,
    p99,
    errors,
  };
}

function descendants(pid: number): number[] {
  return childPids(pid).flatMap((child) => [child, ...descendants(child)]);
}

/**
 * Where sless's function process listens, found from outside: its unix socket (a sandboxed function;
 * the directory carries sless's pid) or, unsandboxed, the loopback TCP port one of sless's
 * descendants listens on.
 */
function functionUpstream(slessPid: number, slessPort: number): { origin: string; socketPath?: string } {
  for (const dir of readdirSync(tmpdir()))
    if (dir.startsWith(`sless-fn-${slessPid}-`) && existsSync(join(tmpdir(), dir, 'http.sock')))
      return { origin: 'http://localhost', socketPath: join(tmpdir(), dir, 'http.sock') };
  const pids = new Set(descendants(slessPid));
  const listening = spawnSync('ss', ['-ltnpH'], { encoding: 'utf8' }).stdout.split('\n');
  for (const line of listening) {
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(line)?.[1]);
    const pid = Number(/pid=(\d+)/.exec(line)?.[1]);
    if (port && port !== slessPort && pids.has(pid)) return { origin: `http://127.0.0.1:${port}` };
  }
  throw new Error('cannot find the function process of sless');
}

interface StartedSless {
  child: ChildProcess;
  port: number;
}

/** The compiled `sless dev` of a checkout, serving the repository once /fn/default/hello answers. */
async function startSless(
  root: string,
  repo: string,
  stateDir: string,
  children: ChildProcess[],
  env: NodeJS.ProcessEnv = {},
): Promise<StartedSless> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(root, 'bin', 'sless.js'), 'dev', '--repo', repo, '--port', String(port), '--state-dir', stateDir],
    { stdio: 'ignore', env: { ...process.env, SLESS_LOG_LEVEL: 'warn', ...env } },
  );
  children.push(child);
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`sless dev (${root}) exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error(`sless dev (${root}) did not serve within 300 s`);
    const answer = await fetch(`http://127.0.0.1:${port}/fn/default/hello`).catch(() => undefined);
    await answer?.arrayBuffer();
    if (answer?.status === 200) return { child, port };
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitForPort(port: number, child: ChildProcess, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (await accepts(port)) return;
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error(`${what} did not listen within 30 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function nginxConfig(dir: string, port: number, upstream: string, socketPath?: string): string {
  return `${process.getuid?.() === 0 ? 'user root;\n' : ''}worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream fn { server ${socketPath ? `unix:${socketPath}` : upstream.replace(/^http:\/\//, '')}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://fn;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

/**
 * /fn/ and the minimal proxy at each fixed rate, back to back in alternating order, ROUNDS times: the
 * median per-round p99 ratio per rate, as the wrk rounds have it.
 */
async function openLoopRounds(fnUrl: string, minimalUrl: string): Promise<void> {
  const vegeta = ensureVegeta();
  const pinTo = PIN ? 0 : undefined;
  for (const rate of RATES) {
    await openLoop(vegeta, fnUrl, rate, 2, pinTo); // warm-up at this rate
    await openLoop(vegeta, minimalUrl, rate, 2, pinTo);
    const pairs: { fn: OpenLoad; minimal: OpenLoad }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const fnFirst = round % 2 === 0;
      const first = await openLoop(vegeta, fnFirst ? fnUrl : minimalUrl, rate, DURATION, pinTo);
      const second = await openLoop(vegeta, fnFirst ? minimalUrl : fnUrl, rate, DURATION, pinTo);
      const pair = fnFirst ? { fn: first, minimal: second } : { fn: second, minimal: first };
      pairs.push(pair);
      console.log(
        `open loop ${rate}/s round ${round + 1}: p99 /fn/ ${pair.fn.p99.toFixed(2)} ms, minimal ${pair.minimal.p99.toFixed(2)} ms ` +
          `(ratio ${(pair.fn.p99 / pair.minimal.p99).toFixed(2)}); p50 ${pair.fn.p50.toFixed(2)} / ${pair.minimal.p50.toFixed(2)} ms; ` +
          `max ${pair.fn.max.toFixed(1)} / ${pair.minimal.max.toFixed(1)} ms; success ${pair.fn.success} / ${pair.minimal.success}`,
      );
    }
    const ratios = pairs.map((p) => p.fn.p99 / p.minimal.p99);
    const fnP99 = median(pairs.map((p) => p.fn.p99));
    const minimalP99 = median(pairs.map((p) => p.minimal.p99));
    const failed = pairs.some((p) => p.fn.success < 1 || p.minimal.success < 1);
    console.log(
      `open loop ${rate}/s: /fn/ ÷ minimal p99 median ${median(ratios).toFixed(2)} (quartiles ` +
        `${percentile(ratios, 25).toFixed(2)}–${percentile(ratios, 75).toFixed(2)}, ${ROUNDS} rounds)`,
    );
    report({
      bench: 'proxy',
      measure: `/fn/ vs minimal Node proxy, p99 at a fixed ${rate} req/s (open loop, median of ${ROUNDS} pairs)`,
      value: `${fnP99.toFixed(2)} ms`,
      baseline: `minimal ${minimalP99.toFixed(2)} ms`,
      ratio: median(ratios),
      target: 'no worse (<= 1), every request answered',
      met: median(ratios) <= 1 && !failed,
    });
  }
}

async function main(): Promise<void> {
  ensureDebianTools();
  const work = await mkdtemp(join(tmpdir(), 'sless-bench-proxy-'));
  const children: ChildProcess[] = [];
  const repo = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return { ok: true };`),
  });
  try {
    ensureCompiled();
    const [started, inline] = await Promise.all([
      Promise.all(
        [PACKAGE_ROOT, ...(process.env.SLESS_BASELINE ? [process.env.SLESS_BASELINE] : [])].map((root, i) =>
          startSless(root, repo.dir, join(work, `state-${i}`), children),
        ),
      ),
      wanted('inline')
        ? startSless(PACKAGE_ROOT, repo.dir, join(work, 'state-inline'), children, {
            SLESS_PROXY_THREAD: 'off',
          })
        : undefined,
    ]);
    const [{ child: sless, port: slessPort }, baseline] = started as [StartedSless, StartedSless?];
    const slessUrl = `http://127.0.0.1:${slessPort}`;
    const { origin, socketPath } = functionUpstream(sless.pid ?? 0, slessPort);
    // Local functions serve on a unix socket: wrk cannot call them directly, the proxies can.
    const upstreamArgs = socketPath ? [origin, socketPath] : [origin];

    const minimalPort = await freePort();
    const minimal = spawn(
      process.execPath,
      [join(PEERS, 'minimal-node-proxy.mjs'), String(minimalPort), ...upstreamArgs],
      { stdio: 'ignore' },
    );
    children.push(minimal);
    const peersUp = [waitForPort(minimalPort, minimal, 'the minimal Node proxy')];
    let sameWorkPort = 0;
    let sameWork: ChildProcess | undefined;
    if (wanted('headers')) {
      sameWorkPort = await freePort();
      sameWork = spawn(
        process.execPath,
        [join(PEERS, 'minimal-node-proxy.mjs'), String(sameWorkPort), ...upstreamArgs],
        { stdio: 'ignore', env: { ...process.env, FORWARDED_HEADERS: '1' } },
      );
      children.push(sameWork);
      peersUp.push(waitForPort(sameWorkPort, sameWork, 'the minimal Node proxy with forwarded headers'));
    }
    let goPort = 0;
    let goProxy: ChildProcess | undefined;
    if (wanted('go')) {
      execFileSync('go', ['build', '-p', '2', '-o', join(work, 'go-proxy'), '.'], {
        cwd: join(PEERS, 'go-proxy'),
        stdio: 'inherit',
      });
      goPort = await freePort();
      goProxy = spawn(join(work, 'go-proxy'), [`127.0.0.1:${goPort}`, ...upstreamArgs], { stdio: 'ignore' });
      children.push(goProxy);
      peersUp.push(waitForPort(goPort, goProxy, 'the Go proxy'));
    }
    let nginxPort = 0;
    let nginx: ChildProcess | undefined;
    if (wanted('nginx')) {
      nginxPort = await freePort();
      await writeFile(join(work, 'nginx.conf'), nginxConfig(work, nginxPort, origin, socketPath));
      nginx = spawn('nginx', ['-p', work, '-c', join(work, 'nginx.conf')], { stdio: 'inherit' });
      children.push(nginx);
      peersUp.push(waitForPort(nginxPort, nginx, 'nginx'));
    }
    await Promise.all(peersUp);

    // /fn/ and minimal stay next to each other, so each round measures them back to back.
    const functionPids = descendants(sless.pid ?? 0);
    const targets: Record<string, { url: string; pids: number[]; functionPids?: number[] }> = {
      '/fn/': { url: `${slessUrl}/fn/default/hello`, pids: [sless.pid ?? 0] },
      'minimal node': { url: `http://127.0.0.1:${minimalPort}/`, pids: [minimal.pid ?? 0] },
      ...(sameWork
        ? { 'minimal + headers': { url: `http://127.0.0.1:${sameWorkPort}/`, pids: [sameWork.pid ?? 0] } }
        : {}),
      ...(baseline && wanted('baseline')
        ? {
            '/fn/ baseline': {
              url: `http://127.0.0.1:${baseline.port}/fn/default/hello`,
              pids: [baseline.child.pid ?? 0],
              functionPids: descendants(baseline.child.pid ?? 0),
            },
          }
        : {}),
      ...(inline
        ? {
            '/fn/ main thread': {
              url: `http://127.0.0.1:${inline.port}/fn/default/hello`,
              pids: [inline.child.pid ?? 0],
              functionPids: descendants(inline.child.pid ?? 0),
            },
          }
        : {}),
      ...(goProxy ? { 'go httputil': { url: `http://127.0.0.1:${goPort}/`, pids: [goProxy.pid ?? 0] } } : {}),
      ...(nginx
        ? {
            'nginx 1 worker': {
              url: `http://127.0.0.1:${nginxPort}/`,
              pids: [nginx.pid ?? 0, ...childPids(nginx.pid ?? 0)],
            },
          }
        : {}),
      ...(socketPath || !wanted('direct') ? {} : { direct: { url: `${origin}/`, pids: [] } }),
    };
    if (PIN) {
      // The proxies share CPU 1; wrk (see wrk()) and the functions behind them share CPU 0.
      pin(
        1,
        Object.values(targets).flatMap((t) => t.pids),
      );
      pin(0, [
        ...descendants(sless.pid ?? 0),
        ...(baseline ? descendants(baseline.child.pid ?? 0) : []),
        ...(inline ? descendants(inline.child.pid ?? 0) : []),
      ]);
    }
    const results: Record<string, Load[]> = {};
    for (const [name, { url, pids, functionPids: fnPids = functionPids }] of Object.entries(targets)) {
      const check = await fetch(url);
      if (check.status !== 200) throw new Error(`${name}: ${url} answered ${check.status}`);
      await check.arrayBuffer();
      await wrk(url, 2, pids, fnPids); // warm-up: JIT, connection pools
      results[name] = [];
    }
    const rounds: { rps: number; p99: number; cpu: number; load: string }[] = [];
    const sameWorkRounds: { rps: number; p99: number; cpu: number }[] = [];
    const inlineRounds: { rps: number; p99: number; cpu: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const before = loadAverage();
      // A B ..., then ... B A: neither goes first every time, and the pair is always back to back.
      const order = Object.entries(targets);
      if (round % 2 === 1) order.reverse();
      for (const [name, { url, pids, functionPids: fnPids = functionPids }] of order)
        results[name]?.push(await wrk(url, DURATION, pids, fnPids));
      const fn = results['/fn/']?.[round] as Load;
      const minimal = results['minimal node']?.[round] as Load;
      const ratios = {
        rps: fn.rps / minimal.rps,
        p99: fn.p99 / minimal.p99,
        cpu: fn.cpuUs / minimal.cpuUs,
        load: `${before} → ${loadAverage()}`,
      };
      rounds.push(ratios);
      const mainThread = results['/fn/ main thread']?.[round];
      if (mainThread)
        inlineRounds.push({
          rps: mainThread.rps / minimal.rps,
          p99: mainThread.p99 / minimal.p99,
          cpu: mainThread.cpuUs / minimal.cpuUs,
        });
      const same = results['minimal + headers']?.[round];
      if (same)
        sameWorkRounds.push({ rps: fn.rps / same.rps, p99: fn.p99 / same.p99, cpu: fn.cpuUs / same.cpuUs });
      console.log(
        `round ${round + 1} (${round % 2 ? 'minimal first' : '/fn/ first'}): /fn/ ${Math.round(fn.rps)} req/s, ` +
          `minimal ${Math.round(minimal.rps)}; /fn/ ÷ minimal: req/s ${ratios.rps.toFixed(2)}, ` +
          `p99 ${ratios.p99.toFixed(2)}, CPU µs/req ${ratios.cpu.toFixed(2)}; load average ${ratios.load}` +
          (same
            ? `; ÷ minimal + headers: req/s ${(fn.rps / same.rps).toFixed(2)}, p99 ${(fn.p99 / same.p99).toFixed(2)}`
            : ''),
      );
    }

    const summary = Object.fromEntries(
      Object.entries(results).map(([name, loads]) => [
        name,
        {
          rps: median(loads.map((l) => l.rps)),
          cpuUs: median(loads.map((l) => l.cpuUs)),
          functionCpuUs: median(loads.map((l) => l.functionCpuUs)),
          p50: median(loads.map((l) => l.p50)),
          p99: median(loads.map((l) => l.p99)),
          errors: loads.reduce((a, l) => a + l.errors, 0),
        },
      ]),
    ) as Record<string, Load>;
    const direct = summary.direct;
    const minimalLoad = summary['minimal node'] as Load;
    const nginxLoad = summary['nginx 1 worker'];
    console.log(
      `wrk -t1 -c50, ${DURATION} s x ${ROUNDS} rounds per target (median)${PIN ? ', pinned' : ''}, node ${process.version}`,
    );
    console.table(
      Object.entries(summary).map(([name, l]) => ({
        target: name,
        'req/s': Math.round(l.rps),
        ...(direct ? { 'of direct': Number((l.rps / direct.rps).toFixed(2)) } : {}),
        'proxy CPU µs/req': Number.isNaN(l.cpuUs) ? '' : Number(l.cpuUs.toFixed(1)),
        'function CPU µs/req': Number(l.functionCpuUs.toFixed(1)),
        'p50 ms': Number(l.p50.toFixed(2)),
        'p99 ms': Number(l.p99.toFixed(2)),
        errors: l.errors,
      })),
    );
    const spread = (values: number[]) =>
      `median ${median(values).toFixed(2)} (quartiles ${percentile(values, 25).toFixed(2)}–${percentile(values, 75).toFixed(2)}, ` +
      `range ${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}, ${values.length} rounds)`;
    const rpsRatios = rounds.map((r) => r.rps);
    const p99Ratios = rounds.map((r) => r.p99);
    const cpuRatios = rounds.map((r) => r.cpu);
    console.log(`/fn/ ÷ minimal node, per round: req/s ${spread(rpsRatios)}`);
    console.log(`/fn/ ÷ minimal node, per round: p99 ${spread(p99Ratios)}`);
    console.log(`/fn/ ÷ minimal node, per round: CPU µs/req ${spread(cpuRatios)}`);
    if (sameWorkRounds.length > 0) {
      console.log(`/fn/ ÷ minimal + headers, per round: req/s ${spread(sameWorkRounds.map((r) => r.rps))}`);
      console.log(`/fn/ ÷ minimal + headers, per round: p99 ${spread(sameWorkRounds.map((r) => r.p99))}`);
      console.log(
        `/fn/ ÷ minimal + headers, per round: CPU µs/req ${spread(sameWorkRounds.map((r) => r.cpu))}`,
      );
    }
    if (inlineRounds.length > 0) {
      console.log(
        `/fn/ main thread ÷ minimal node, per round: req/s ${spread(inlineRounds.map((r) => r.rps))}`,
      );
      console.log(
        `/fn/ main thread ÷ minimal node, per round: p99 ${spread(inlineRounds.map((r) => r.p99))}`,
      );
      console.log(
        `/fn/ main thread ÷ minimal node, per round: CPU µs/req ${spread(inlineRounds.map((r) => r.cpu))}`,
      );
    }
    console.log(
      `rounds with req/s ≥ 0.9 and p99 ≤ 1: ${rounds.filter((r) => r.rps >= 0.9 && r.p99 <= 1).length}/${ROUNDS}`,
    );
    const fn = summary['/fn/'] as Load;
    for (const [name, l] of Object.entries(summary))
      report({
        bench: 'proxy',
        measure: `${name} req/s (wrk -c50; p99 ${l.p99.toFixed(2)} ms${Number.isNaN(l.cpuUs) ? '' : `; ${l.cpuUs.toFixed(0)} CPU µs/req`})`,
        value: `${Math.round(l.rps)}`,
        ...(direct ? { baseline: `direct ${Math.round(direct.rps)}`, ratio: l.rps / direct.rps } : {}),
      });
    report(
      {
        bench: 'proxy',
        measure: `/fn/ vs minimal Node proxy, req/s (median of ${ROUNDS} back-to-back pairs)`,
        value: `${Math.round(fn.rps)}`,
        baseline: `minimal ${Math.round(minimalLoad.rps)}`,
        ratio: median(rpsRatios),
        target: '>= 0.9',
        met: median(rpsRatios) >= 0.9,
      },
      {
        bench: 'proxy',
        measure: `/fn/ vs minimal Node proxy, p99 (median of ${ROUNDS} back-to-back pairs)`,
        value: `${fn.p99.toFixed(2)} ms`,
        baseline: `minimal ${minimalLoad.p99.toFixed(2)} ms`,
        ratio: median(p99Ratios),
        target: 'no worse (<= 1)',
        met: median(p99Ratios) <= 1,
      },
      {
        bench: 'proxy',
        measure: `/fn/ vs minimal Node proxy, CPU µs per request (median of ${ROUNDS} pairs)`,
        value: `${fn.cpuUs.toFixed(1)} µs`,
        baseline: `minimal ${minimalLoad.cpuUs.toFixed(1)} µs`,
        ratio: median(cpuRatios),
        target: '<= 1.11 (the inverse of 0.9)',
        met: median(cpuRatios) <= 1 / 0.9,
      },
      ...(nginxLoad
        ? [
            {
              bench: 'proxy',
              measure: '/fn/ vs nginx, req/s',
              value: `${Math.round(fn.rps)}`,
              baseline: `nginx ${Math.round(nginxLoad.rps)}`,
              ratio: fn.rps / nginxLoad.rps,
              target: '>= 0.8 (long goal)',
              met: fn.rps / nginxLoad.rps >= 0.8,
            },
          ]
        : []),
    );
    if (RATES.length > 0)
      await openLoopRounds(`${slessUrl}/fn/default/hello`, `http://127.0.0.1:${minimalPort}/`);
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : undefined)));
    await repo.remove();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
