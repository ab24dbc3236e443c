// Open idle WebSockets per GiB of sless memory: N `ws` clients open sockets through /fn/ to one Node
// function (which accepts them with `ws`) and then send nothing; the figure is N divided by the
// growth of sless's resident memory (VmRSS of the whole process, threads included) from before the
// first socket to after the last, with the proxy thread (`sless dev` as it runs by default) and
// without it (`--proxy-thread off`: the main thread joins the sockets). The function's own memory is
// not counted. No figure here is asserted: they are read, not tested.
// Run: npx tsx bench/websocket-idle.ts   (SOCKETS, default 2000; BATCH opened at once, default 100)
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, TestRepo } from '../test/helpers/git.js';
import { vendoredWs } from '../test/helpers/vendored-ws.js';
import { ensureCompiled } from './compiled.ts';
import { report } from './report.ts';

const SOCKETS = Number(process.env.SOCKETS ?? 2000);
const BATCH = Number(process.env.BATCH ?? 100);
const GIB = 1024 ** 3;

const HANDLER = `
const { WebSocketServer } = require('ws');
const wss = new WebSocketServer({ noServer: true });
exports.handle = async () => ({ ok: true });
exports.upgrade = (req, socket, head) =>
  wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data) => ws.send(data)));
`;

/** Resident memory of a process, in bytes, from /proc/PID/status. */
function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.replace(/[^0-9]/g, '') ?? 0) * 1024;
}

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/** One echo, so that each socket is known to be joined end to end. */
function echo(ws: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    ws.once('message', () => resolve());
    ws.once('error', reject);
    ws.send('ping');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function measure(repo: string, proxyThread: boolean): Promise<{ perGiB: number; grewMb: number }> {
  const stateDir = await mkdtemp(join(tmpdir(), 'sless-bench-ws-'));
  let sless: ChildProcess | undefined;
  const sockets: WebSocket[] = [];
  try {
    const port = await freePort();
    sless = spawn(
      process.execPath,
      [
        join(PACKAGE_ROOT, 'bin', 'sless.js'),
        'dev',
        '--repo',
        repo,
        '--port',
        String(port),
        '--state-dir',
        stateDir,
        '--proxy-thread',
        proxyThread ? 'on' : 'off',
      ],
      { stdio: 'ignore', env: { ...process.env, SLESS_LOG_LEVEL: 'warn' } },
    );
    const deadline = Date.now() + 300_000;
    for (;;) {
      if (sless.exitCode !== null) throw new Error(`sless dev exited with ${sless.exitCode}`);
      if (Date.now() > deadline) throw new Error('sless dev did not serve within 300 s');
      const answer = await fetch(`http://127.0.0.1:${port}/fn/default/idle`).catch(() => undefined);
      await answer?.arrayBuffer();
      if (answer?.status === 200) break;
      await sleep(100);
    }
    const url = `ws://127.0.0.1:${port}/fn/default/idle/`;
    // Warm-up: the upgrade path's code and buffers, then back to none open.
    const warm = await Promise.all(Array.from({ length: BATCH }, () => open(url)));
    await Promise.all(warm.map(echo));
    for (const ws of warm) ws.terminate();
    await sleep(2000);
    const pid = sless.pid ?? 0;
    const before = rssBytes(pid);
    while (sockets.length < SOCKETS) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(BATCH, SOCKETS - sockets.length) }, () => open(url)),
      );
      await Promise.all(batch.map(echo));
      sockets.push(...batch);
    }
    // Idle: whatever the joins allocate has been allocated; a collection may have run meanwhile.
    await sleep(3000);
    const after = rssBytes(pid);
    const grew = Math.max(after - before, 1);
    const perGiB = SOCKETS / (grew / GIB);
    console.log(
      `${proxyThread ? 'proxy thread' : 'main thread'}: ${SOCKETS} idle sockets; sless RSS ` +
        `${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MiB ` +
        `(+${(grew / 2 ** 20).toFixed(1)} MiB, ${(grew / SOCKETS / 1024).toFixed(1)} KiB a socket): ` +
        `${Math.round(perGiB)} sockets per GiB`,
    );
    return { perGiB, grewMb: grew / 2 ** 20 };
  } finally {
    for (const ws of sockets) ws.terminate();
    if (sless && sless.exitCode === null) {
      const exited = once(sless, 'exit');
      sless.kill('SIGTERM');
      await exited;
    }
    await rm(stateDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  ensureCompiled();
  const repo = await TestRepo.create({
    'idle/function.yaml': functionManifest('idle', { timeoutSec: 30 }),
    'idle/handler.js': HANDLER,
    ...vendoredWs('idle'),
  });
  try {
    const thread = await measure(repo.dir, true);
    const main = await measure(repo.dir, false);
    report(
      {
        bench: 'websocket-idle',
        measure: `idle WebSockets per GiB of sless RSS, proxy thread (${SOCKETS} open)`,
        value: `${Math.round(thread.perGiB)}`,
        baseline: `+${thread.grewMb.toFixed(1)} MiB`,
      },
      {
        bench: 'websocket-idle',
        measure: `idle WebSockets per GiB of sless RSS, main thread (${SOCKETS} open)`,
        value: `${Math.round(main.perGiB)}`,
        baseline: `+${main.grewMb.toFixed(1)} MiB`,
      },
    );
  } finally {
    await repo.remove();
  }
}

await main();
