// Cold start per runtime: time from spawn() to the first byte of the response to a real request
// (the runtime's own start-up + loading the user module + serving). Median of 10 runs; the Go binary
// is built beforehand. Run: npx tsx bench/cold-start.ts
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  freePort,
  type Launch,
  prepareTrivialFunctions,
  type RuntimeName,
} from '../test/runtimes/harness.ts';
import { report } from './report.ts';

const RUNS = Number(process.env.RUNS ?? 10);
const TARGET_MS: Record<RuntimeName, number> = { nodejs20: 150, 'python3.11': 300, 'go1.21': 50 };

/** One attempt: connect, send a request, resolve on the first response byte; reject on refusal. */
function firstByte(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setNoDelay(true);
    sock.once('connect', () => sock.write('GET /cold HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n'));
    sock.once('data', () => {
      sock.destroy();
      resolve();
    });
    sock.once('error', (err) => {
      sock.destroy();
      reject(err);
    });
  });
}

async function coldStart(launch: Launch): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const proc = spawn(launch.command, launch.args, {
    env: { ...process.env, ...launch.env, PORT: String(port), SLESS_FUNCTION_NAME: 'bench' },
    stdio: 'ignore',
  });
  const exited = once(proc, 'exit');
  try {
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`${launch.command} exited with ${proc.exitCode}`);
      try {
        await firstByte(port);
        return performance.now() - started;
      } catch {
        await new Promise((r) => setTimeout(r, 1));
      }
      if (performance.now() - started > 10_000) throw new Error(`${launch.command}: no response in 10 s`);
    }
  } finally {
    proc.kill('SIGKILL');
    await exited;
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

const dir = mkdtempSync(path.join(tmpdir(), 'sless-cold-start-'));
try {
  const launches = await prepareTrivialFunctions(dir);
  const rows: Record<string, string | number>[] = [];
  for (const name of Object.keys(launches) as RuntimeName[]) {
    const launch = launches[name];
    await coldStart(launch); // warm the OS page cache; not counted
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) times.push(await coldStart(launch));
    const med = median(times);
    rows.push({
      runtime: name,
      'median ms': Number(med.toFixed(1)),
      'min ms': Number(Math.min(...times).toFixed(1)),
      'max ms': Number(Math.max(...times).toFixed(1)),
      'target ms': TARGET_MS[name],
      ok: med < TARGET_MS[name] ? 'yes' : 'NO',
    });
    report({
      bench: 'cold-start',
      measure: `${name} spawn → first byte (median of ${RUNS})`,
      value: `${med.toFixed(1)} ms`,
      target: `< ${TARGET_MS[name]} ms`,
      met: med < TARGET_MS[name],
    });
  }
  console.log(`cold start: spawn → first response byte, ${RUNS} runs each (node ${process.version})`);
  console.table(rows);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
