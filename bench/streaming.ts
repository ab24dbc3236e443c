// Streamed answers through /fn/, in one run against the same Node function process: time to the
// first event of an SSE answer through /fn/ against direct (the function's own socket), and small
// chunks per second through /fn/ against the minimal Node proxy (bench/peers, node:http + an undici
// Pool, which pipes). Rounds alternate the targets so that machine noise hits them alike; each figure
// is the median of per-round ratios. No figure here is asserted: they are read, not tested.
// Run: npx tsx bench/streaming.ts   (ROUNDS, default 7; FIRSTS requests per TTFB round, default 40;
// CHUNKS per chunk round, default 20000, of 64 bytes each)
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, TestRepo } from '../test/helpers/git.js';
import { ensureCompiled } from './compiled.ts';
import { report } from './report.ts';
import { median } from './stats.js';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const FIRSTS = Number(process.env.FIRSTS ?? 40);
const CHUNKS = Number(process.env.CHUNKS ?? 20_000);
const PEERS = fileURLToPath(new URL('./peers/', import.meta.url));

const HANDLER = `
const chunk = 'x'.repeat(63) + '\\n';
exports.handle = async (event) => {
  if (event.path === '/first')
    return { statusCode: 200, headers: { 'content-type': 'text/event-stream' },
      body: (async function* () { yield 'data: first\\n\\n'; })() };
  if (event.path === '/chunks') {
    const n = Number(event.query.n);
    return { statusCode: 200, headers: { 'content-type': 'text/plain' },
      body: (async function* () { for (let i = 0; i < n; i++) yield chunk; })() };
  }
  return { ok: true };
};
`;

/** The function's unix socket: sandboxed functions serve on one, in a directory named after sless's pid. */
function functionSocket(slessPid: number): string {
  for (const dir of readdirSync(tmpdir()))
    if (dir.startsWith(`sless-fn-${slessPid}-`) && existsSync(join(tmpdir(), dir, 'http.sock')))
      return join(tmpdir(), dir, 'http.sock');
  throw new Error('cannot find the function socket of sless (is the sandbox off?)');
}

interface Target {
  name: string;
  client: Client;
  prefix: string;
}

/** Milliseconds from sending a request to its first body byte, median over FIRSTS requests. */
async function firstByteMs(target: Target): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < FIRSTS; i++) {
    const started = performance.now();
    const res = await target.client.request({ path: `${target.prefix}/first`, method: 'GET' });
    for await (const _ of res.body) {
      times.push(performance.now() - started);
      break;
    }
    await res.body.dump().catch(() => {});
  }
  return median(times);
}

/** Chunks per second of one answer of CHUNKS 64-byte chunks, read to its end. */
async function chunksPerSecond(target: Target): Promise<number> {
  const started = performance.now();
  const res = await target.client.request({ path: `${target.prefix}/chunks?n=${CHUNKS}`, method: 'GET' });
  let bytes = 0;
  for await (const chunk of res.body) bytes += (chunk as Buffer).length;
  if (bytes !== CHUNKS * 64) throw new Error(`${target.name}: ${bytes} bytes, not ${CHUNKS * 64}`);
  return CHUNKS / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  ensureCompiled();
  const children: ChildProcess[] = [];
  const repo = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello', { timeoutSec: 30 }),
    'hello/handler.js': HANDLER,
  });
  const stateDir = await mkdtemp(join(tmpdir(), 'sless-bench-stream-'));
  try {
    const port = await freePort();
    const sless = spawn(
      process.execPath,
      [
        join(PACKAGE_ROOT, 'bin', 'sless.js'),
        'dev',
        '--repo',
        repo.dir,
        '--port',
        String(port),
        '--state-dir',
        stateDir,
      ],
      { stdio: 'ignore', env: { ...process.env, SLESS_LOG_LEVEL: 'warn' } },
    );
    children.push(sless);
    const deadline = Date.now() + 300_000;
    for (;;) {
      if (sless.exitCode !== null) throw new Error(`sless dev exited with ${sless.exitCode}`);
      if (Date.now() > deadline) throw new Error('sless dev did not serve within 300 s');
      const answer = await fetch(`http://127.0.0.1:${port}/fn/default/hello`).catch(() => undefined);
      await answer?.arrayBuffer();
      if (answer?.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const socketPath = functionSocket(sless.pid ?? 0);
    const minimalPort = await freePort();
    const minimal = spawn(
      process.execPath,
      [join(PEERS, 'minimal-node-proxy.mjs'), String(minimalPort), 'http://localhost', socketPath],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(minimal);
    await once(minimal.stdout as NodeJS.ReadableStream, 'data');
    const targets: Record<'direct' | 'fn' | 'minimal', Target> = {
      direct: { name: 'direct', client: new Client('http://localhost', { socketPath }), prefix: '' },
      fn: { name: '/fn/', client: new Client(`http://127.0.0.1:${port}`), prefix: '/fn/default/hello' },
      minimal: { name: 'minimal proxy', client: new Client(`http://127.0.0.1:${minimalPort}`), prefix: '' },
    };
    // Warm-up: connections, JIT.
    for (const t of Object.values(targets)) {
      await firstByteMs(t);
      await chunksPerSecond(t);
    }
    const ttfb = { direct: [] as number[], fn: [] as number[], ratio: [] as number[] };
    const rate = { fn: [] as number[], minimal: [] as number[], ratio: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      const flip = round % 2 === 1;
      const [a, b] = flip ? (['fn', 'direct'] as const) : (['direct', 'fn'] as const);
      const first = { [a]: await firstByteMs(targets[a]), [b]: await firstByteMs(targets[b]) } as Record<
        'direct' | 'fn',
        number
      >;
      ttfb.direct.push(first.direct);
      ttfb.fn.push(first.fn);
      ttfb.ratio.push(first.fn / first.direct);
      const [c, d] = flip ? (['minimal', 'fn'] as const) : (['fn', 'minimal'] as const);
      const chunks = {
        [c]: await chunksPerSecond(targets[c]),
        [d]: await chunksPerSecond(targets[d]),
      } as Record<'fn' | 'minimal', number>;
      rate.fn.push(chunks.fn);
      rate.minimal.push(chunks.minimal);
      rate.ratio.push(chunks.fn / chunks.minimal);
      console.log(
        `round ${round + 1}: first byte direct ${first.direct.toFixed(2)} ms, /fn/ ${first.fn.toFixed(2)} ms; ` +
          `chunks/s /fn/ ${Math.round(chunks.fn)}, minimal ${Math.round(chunks.minimal)}`,
      );
    }
    const fmt = (xs: number[]) =>
      `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
    console.log(
      `time to first event, ms: direct ${fmt(ttfb.direct)}, /fn/ ${fmt(ttfb.fn)}; /fn/ ÷ direct ${fmt(ttfb.ratio)}`,
    );
    console.log(
      `chunks/s (64 B): /fn/ ${Math.round(median(rate.fn))}, minimal proxy ${Math.round(median(rate.minimal))}; /fn/ ÷ minimal ${fmt(rate.ratio)}`,
    );
    report(
      {
        bench: 'streaming',
        measure: 'time to first SSE event via /fn/',
        value: `${median(ttfb.fn).toFixed(2)} ms`,
        baseline: `direct ${median(ttfb.direct).toFixed(2)} ms`,
        ratio: median(ttfb.ratio),
      },
      {
        bench: 'streaming',
        measure: '64-byte chunks/s via /fn/',
        value: `${Math.round(median(rate.fn))}/s`,
        baseline: `minimal Node proxy ${Math.round(median(rate.minimal))}/s`,
        ratio: median(rate.ratio),
      },
    );
    for (const t of Object.values(targets)) await t.client.close();
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? once(c, 'exit') : undefined)));
    await repo.remove();
    await rm(stateDir, { recursive: true, force: true });
  }
}

await main();
