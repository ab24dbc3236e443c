// Open-loop load: requests sent at a fixed rate whatever the answers do (vegeta, built from Go
// modules). wrk's closed loop (50 connections, each waiting for its answer) keeps a proxy saturated,
// so its p99 mostly measures the queue that throughput decides. At a fixed rate below saturation, a
// proxy's tail is its own: garbage-collector pauses and scheduling, not the queue. And a pause counts
// against every request that should have been sent meanwhile, not only the few that were waiting.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const VEGETA = 'github.com/tsenart/vegeta/v12@v12.13.0';
const BIN_DIR = join(homedir(), '.cache', 'sless', 'bench-bin', 'vegeta-v12.13.0');

/** The vegeta binary, built once into the user's cache from the Go module proxy. */
export function ensureVegeta(): string {
  const binary = join(BIN_DIR, 'vegeta');
  if (existsSync(binary)) return binary;
  console.log(`building ${VEGETA} (go install, once)`);
  execFileSync('go', ['install', '-p', '2', VEGETA], {
    stdio: 'inherit',
    env: { ...process.env, GOBIN: BIN_DIR },
  });
  return binary;
}

export interface OpenLoad {
  /** Requests per second asked for, and the share that got a 2xx. */
  rate: number;
  success: number;
  p50: number;
  p99: number;
  max: number;
}

interface VegetaReport {
  success: number;
  latencies: { '50th': number; '99th': number; max: number };
}

/** `rate` GETs per second for `seconds` to `url`; latencies in ms. `pinTo`: run vegeta on that CPU. */
export async function openLoop(
  vegeta: string,
  url: string,
  rate: number,
  seconds: number,
  pinTo?: number,
): Promise<OpenLoad> {
  const attackArgs = ['attack', `-rate=${rate}/s`, `-duration=${seconds}s`, '-keepalive=true'];
  const attack = spawn(
    pinTo === undefined ? vegeta : 'taskset',
    pinTo === undefined ? attackArgs : ['-c', String(pinTo), vegeta, ...attackArgs],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  attack.stdin.end(`GET ${url}\n`);
  const report = spawn(vegeta, ['report', '-type=json'], { stdio: ['pipe', 'pipe', 'inherit'] });
  attack.stdout.pipe(report.stdin);
  let out = '';
  report.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const [[attackCode], [reportCode]] = await Promise.all([once(attack, 'exit'), once(report, 'exit')]);
  if (attackCode !== 0 || reportCode !== 0)
    throw new Error(`vegeta ${url} at ${rate}/s exited with ${attackCode}, ${reportCode}`);
  const parsed = JSON.parse(out) as VegetaReport;
  const ms = (ns: number) => ns / 1e6;
  return {
    rate,
    success: parsed.success,
    p50: ms(parsed.latencies['50th']),
    p99: ms(parsed.latencies['99th']),
    max: ms(parsed.latencies.max),
  };
}
